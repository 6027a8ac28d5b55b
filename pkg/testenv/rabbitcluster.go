package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rabbitClusterNodes is the number of nodes deploy/local/cluster/rabbitmq.sh
// starts.
const rabbitClusterNodes = 3

// rabbitClusterPorts is the block of ports the script takes from its base
// port: AMQP, distribution, epmd and rabbitmqctl's.
const rabbitClusterPorts = 31

// RabbitCluster is a private three-node RabbitMQ cluster on ports of its own
// (deploy/local/cluster/rabbitmq.sh), for fault tests: the shared broker is
// never touched. Nodes are numbered 0, 1, 2 here (1, 2, 3 in the script).
type RabbitCluster struct {
	t      testing.TB
	dir    string
	script string
	urls   []string
	// ports releases the reservations of every block of ports tried, once
	// killAll has made sure nothing of the cluster listens on them.
	ports []func()
}

// StartRabbitCluster starts the cluster and returns once its three nodes
// run as one cluster (about 20 s on a 2-core machine). Every node, its
// epmd and the script's watchdog are killed by PID when the test ends, even
// when it fails; the watchdog also takes the cluster down should the test
// binary be killed before its cleanup runs. Without bash or rabbitmq-server
// the test fails, saying how to install them.
func StartRabbitCluster(t testing.TB) *RabbitCluster {
	t.Helper()
	script := filepath.Join(Root(), "deploy", "local", "cluster", "rabbitmq.sh")
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("this test runs a private RabbitMQ cluster with %s, which needs bash: apt-get install -y bash (%v)", script, err)
	}
	c := &RabbitCluster{t: t, dir: t.TempDir(), script: script}
	t.Cleanup(c.killAll)
	var out []byte
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		base, release := freePorts(t, rabbitClusterPorts)
		c.ports = append(c.ports, release)
		cmd := exec.Command("bash", script, "up", c.dir, strconv.Itoa(base))
		cmd.Env = append(os.Environ(), "RABBIT_CLUSTER_WATCH_PID="+strconv.Itoa(os.Getpid()))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		out, err = cmd.Output()
		if err == nil {
			t.Logf("RabbitMQ cluster up in %s (base port %d)", time.Since(start).Round(100*time.Millisecond), base)
			break
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 127 {
			t.Fatalf("this test runs a private 3-node RabbitMQ cluster: %s", strings.TrimSpace(stderr.String()))
		}
		// Another test may have taken a port of the block in between.
		if !strings.Contains(stderr.String(), "eaddrinuse") && !strings.Contains(stderr.String(), "is taken") {
			t.Fatalf("start a private RabbitMQ cluster (%s up): %v\n%s", script, err, stderr.String())
		}
		t.Logf("RabbitMQ cluster on base port %d: a port was taken, trying another", base)
	}
	if err != nil {
		t.Fatalf("start a private RabbitMQ cluster: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if list, ok := strings.CutPrefix(line, "AMQP_URL="); ok {
			c.urls = strings.Split(list, ",")
		}
	}
	if len(c.urls) != rabbitClusterNodes {
		t.Fatalf("%s up printed no AMQP_URL with %d URLs:\n%s", script, rabbitClusterNodes, out)
	}
	return c
}

// URL is AMQP_URL for the cluster: the three nodes' URLs, comma-separated.
func (c *RabbitCluster) URL() string { return strings.Join(c.urls, ",") }

// URLs are the nodes' URLs, node 0 first.
func (c *RabbitCluster) URLs() []string { return append([]string(nil), c.urls...) }

// NodeURL is node i's URL.
func (c *RabbitCluster) NodeURL(i int) string { return c.urls[i] }

// Kill SIGKILLs node i's process group (a crash: no goodbye to its peers
// or clients) and waits until it is gone.
func (c *RabbitCluster) Kill(i int) {
	c.t.Helper()
	c.run(30*time.Second, "kill", c.dir, strconv.Itoa(i+1))
}

// Start starts node i again and returns once it serves AMQP; it rejoins
// the cluster by itself (its membership is on its disk).
func (c *RabbitCluster) Start(i int) {
	c.t.Helper()
	c.run(150*time.Second, "start", c.dir, strconv.Itoa(i+1))
}

// Ctl runs rabbitmqctl against node i and returns its output.
func (c *RabbitCluster) Ctl(i int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script, "ctl", c.dir, strconv.Itoa(i + 1)}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Leaders asks node via for the node (0, 1 or 2) that leads each queue:
// a quorum queue's leader, a classic queue's home.
func (c *RabbitCluster) Leaders(via int) (map[string]int, error) {
	out, err := c.Ctl(via, "list_queues", "-q", "--no-table-headers", "name", "leader", "pid")
	if err != nil {
		return nil, fmt.Errorf("list_queues: %v: %s", err, out)
	}
	leaders := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		node := f[1]
		if node == "" { // classic: the node is in its pid, <node@host.1.2.3>
			node, _, _ = strings.Cut(strings.TrimPrefix(f[2], "<"), ".")
		}
		if i := nodeIndex(node); i >= 0 {
			leaders[f[0]] = i
		}
	}
	return leaders, nil
}

// connectionName is the name a client gave its connection, in
// list_connections' client_properties.
var connectionName = regexp.MustCompile(`\{"connection_name","([^"]*)"\}`)

// Connections asks node via for the client connections of the cluster:
// the names clients gave them (broker.Options.Source for a broker.Conn;
// "?" when none) by the node each is on.
func (c *RabbitCluster) Connections(via int) ([][]string, error) {
	out, err := c.Ctl(via, "list_connections", "-q", "--no-table-headers", "pid", "client_properties")
	if err != nil {
		return nil, fmt.Errorf("list_connections: %v: %s", err, out)
	}
	byNode := make([][]string, rabbitClusterNodes)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pid, props, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		name := "?"
		if m := connectionName.FindStringSubmatch(props); m != nil {
			name = m[1]
		}
		if i := nodeIndex(strings.SplitN(strings.TrimPrefix(pid, "<"), ".", 2)[0]); i >= 0 {
			byNode[i] = append(byNode[i], name)
		}
	}
	for _, names := range byNode {
		sort.Strings(names)
	}
	return byNode, nil
}

// nodeIndex is the index of a node name the script gave ("wr<base>n<N>@localhost"), -1 if none.
func nodeIndex(node string) int {
	name, _, _ := strings.Cut(node, "@")
	for i := range rabbitClusterNodes {
		if strings.HasSuffix(name, "n"+strconv.Itoa(i+1)) {
			return i
		}
	}
	return -1
}

func (c *RabbitCluster) run(timeout time.Duration, args ...string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("%s %s: %v\n%s", filepath.Base(c.script), strings.Join(args, " "), err, out)
	}
}

// killAll kills, by the PIDs the script wrote down, every process group it
// started: the nodes, the epmd, the watchdog. It does not rely on the script
// (or on the nodes answering), so it works whatever state the test left.
func (c *RabbitCluster) killAll() {
	names := []string{"watch", "epmd"}
	for i := range rabbitClusterNodes {
		names = append(names, "node"+strconv.Itoa(i+1))
	}
	var pids []int
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(c.dir, n+".pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		pids = append(pids, pid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) {
			if time.Now().After(deadline) {
				c.t.Errorf("RabbitMQ cluster process %d still alive 10 s after SIGKILL", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, release := range c.ports {
		release()
	}
}

// processAlive reports whether pid runs; a zombie (dead, not yet reaped by
// a parent that may never do it) does not.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
