package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelSet is a private Redis primary with replicas and three
// sentinels (master name "wr", quorum 2, down-after 1000 ms), started by
// deploy/local/replicated.sh on free ports. Every process is killed by PID
// when the test ends, even when it fails.
type SentinelSet struct {
	t     testing.TB
	dir   string
	doors bool
	// Primary and Replicas are the ports the set started with; after a
	// failover the roles change (Master tells which is the primary).
	Primary   int
	Replicas  []int
	Sentinels []int
	// URL is REDIS_URL for the services: redis+sentinel://.../wr.
	URL string
	// Links are the proxies the replicas replicate through (one each),
	// when asked for: delay one to make its replica lag, cut it to cut the
	// replica off.
	Links []*Proxy
}

// SentinelOptions shape a SentinelSet (StartSentinelSetWith).
type SentinelOptions struct {
	Replicas int
	// Linked: each replica reaches the primary through a Proxy of its
	// own (SentinelSet.Links).
	Linked bool
	// NoSentinels: a primary and its replicas alone (no URL, no
	// failover): for tests of replication that must not fail over
	// behind their back when a loaded machine stalls a node.
	NoSentinels bool
	// Doors: everyone logs in, as users of their own (replicated.sh
	// SENTINEL_USERS=1), so a door can be shut to one kind of client
	// alone: a node's to its sentinels and replicas (Isolate), the
	// sentinels' to a gateway that gives GatewayURL (ShutOut).
	Doors bool
}

// StartSentinelSet starts a SentinelSet of replicas replicas; with linked,
// each replica reaches the primary through a Proxy of its own
// (SentinelSet.Links).
func StartSentinelSet(t testing.TB, replicas int, linked bool) *SentinelSet {
	t.Helper()
	return StartSentinelSetWith(t, SentinelOptions{Replicas: replicas, Linked: linked})
}

// StartSentinelSetWith starts a SentinelSet as o says.
func StartSentinelSetWith(t testing.TB, o SentinelOptions) *SentinelSet {
	t.Helper()
	replicas, linked := o.Replicas, o.Linked
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("the failover tests run their own redis-server and sentinels, which are not installed: apt-get install -y redis-server (%v)", err)
	}
	s := &SentinelSet{t: t, dir: logDir(t, "sentinel"), doors: o.Doors}
	s.Primary = FreePort(t)
	var rs, ss, via []string
	for range replicas {
		p := FreePort(t)
		s.Replicas = append(s.Replicas, p)
		rs = append(rs, strconv.Itoa(p))
		if linked {
			l := StartProxy(t, fmt.Sprintf("127.0.0.1:%d", s.Primary))
			s.Links = append(s.Links, l)
			via = append(via, l.Addr())
		}
	}
	sentinels := 3
	if o.NoSentinels {
		sentinels = 0
	}
	for range sentinels {
		p := FreePort(t)
		s.Sentinels = append(s.Sentinels, p)
		ss = append(ss, strconv.Itoa(p))
	}
	t.Cleanup(s.down)
	var env []string
	if o.Doors {
		env = append(env, "SENTINEL_USERS=1")
	}
	if len(ss) == 0 {
		ss = []string{"none"}
	}
	out := runReplicatedEnv(t, env, "sentinel", "up", s.dir, strconv.Itoa(s.Primary),
		strings.Join(rs, ","), strings.Join(ss, ","), strings.Join(via, ","))
	if !o.NoSentinels {
		s.URL = envLine(t, out, "REDIS_URL")
	}
	return s
}

// Lag delays every link by d (0 ends it); Cut cuts them all.
func (s *SentinelSet) Lag(d time.Duration) {
	for _, l := range s.Links {
		l.Delay(d)
	}
}

// Cut cuts every replica's link to the primary it started with.
func (s *SentinelSet) Cut() {
	for _, l := range s.Links {
		l.Cut()
	}
}

// runReplicated runs deploy/local/replicated.sh and returns its output.
func runReplicated(t testing.TB, args ...string) string {
	t.Helper()
	return runReplicatedEnv(t, nil, args...)
}

// runReplicatedEnv is runReplicated with env added to the script's.
func runReplicatedEnv(t testing.TB, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(Root(), "deploy", "local", "replicated.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/local/replicated.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// envLine is the value of NAME=value in out.
func envLine(t testing.TB, out, name string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("replicated.sh printed no %s:\n%s", name, out)
	return ""
}

// down kills every process of the set by PID.
func (s *SentinelSet) down() {
	matches, _ := filepath.Glob(filepath.Join(s.dir, "*.pid"))
	for _, f := range matches {
		killPIDFile(f)
	}
}

func killPIDFile(f string) {
	b, err := os.ReadFile(f)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 200 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill crashes the Redis node on port (SIGKILL).
func (s *SentinelSet) Kill(port int) {
	killPIDFile(filepath.Join(s.dir, fmt.Sprintf("redis-%d.pid", port)))
}

// Isolate shuts the node on port's door to the sentinels and replicas (a
// set started with Doors): their users are turned off and their
// connections closed, so the sentinels lose sight of it and its replicas
// stop streaming from it, while every other client (the services) still
// reaches it: a split brain once the sentinels promote another. Rejoin
// opens the door again.
func (s *SentinelSet) Isolate(ctx context.Context, port int) error {
	return s.door(ctx, port, "off")
}

// Rejoin undoes Isolate: the sentinels reach the node again and, if
// another was promoted meanwhile, make it a replica of that one.
func (s *SentinelSet) Rejoin(ctx context.Context, port int) error {
	return s.door(ctx, port, "on")
}

// GatewayURL is URL for a client that logs in to the sentinels as the
// gateway (a set started with Doors): ShutOut shuts their door to it
// alone.
func (s *SentinelSet) GatewayURL() string {
	return strings.Replace(s.URL, "svc:svc@", "gateway:gateway@", 1)
}

// ShutOut shuts every sentinel's door to the clients of GatewayURL: the
// user turned off, its connections closed, so such a client can no longer
// ask who the primary is (nor learn of a failover), while the sentinels
// still reach each other and every other client. LetIn opens it again.
func (s *SentinelSet) ShutOut(ctx context.Context) error { return s.sentinelDoor(ctx, "off") }

// LetIn undoes ShutOut.
func (s *SentinelSet) LetIn(ctx context.Context) error { return s.sentinelDoor(ctx, "on") }

func (s *SentinelSet) sentinelDoor(ctx context.Context, state string) error {
	for _, p := range s.Sentinels {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p), Username: "svc", Password: "svc",
			DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
		err := c.Do(ctx, "ACL", "SETUSER", "gateway", state).Err()
		if err == nil && state == "off" {
			if kerr := c.Do(ctx, "CLIENT", "KILL", "USER", "gateway").Err(); kerr != nil && !strings.Contains(kerr.Error(), "No such") {
				err = kerr
			}
		}
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("sentinel %d: gateway %s: %w", p, state, err)
		}
	}
	return nil
}

func (s *SentinelSet) door(ctx context.Context, port int, state string) error {
	n := s.Node(port)
	for _, user := range []string{"sentinel", "replica"} {
		if err := n.Do(ctx, "ACL", "SETUSER", user, state).Err(); err != nil {
			return fmt.Errorf("ACL SETUSER %s %s on %d: %w", user, state, port, err)
		}
		if state == "off" {
			if err := n.Do(ctx, "CLIENT", "KILL", "USER", user).Err(); err != nil && !strings.Contains(err.Error(), "No such") {
				return fmt.Errorf("CLIENT KILL USER %s on %d: %w", user, port, err)
			}
		}
	}
	return nil
}

// NodeURL is a plain redis:// URL of the node on port.
func (s *SentinelSet) NodeURL(port int) string { return fmt.Sprintf("redis://127.0.0.1:%d/0", port) }

// Node is a client of the node on port alone (no failover), closed when
// the test ends.
func (s *SentinelSet) Node(port int) *redis.Client {
	o := &redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second}
	if s.doors {
		o.Username, o.Password = "svc", "svc"
	}
	c := redis.NewClient(o)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Master is the port the sentinels name as the primary now (0 if none
// answers).
func (s *SentinelSet) Master(ctx context.Context) int {
	for _, p := range s.Sentinels {
		o := &redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p), DialTimeout: time.Second}
		if s.doors {
			o.Username, o.Password = "svc", "svc"
		}
		c := redis.NewSentinelClient(o)
		addr, err := c.GetMasterAddrByName(ctx, "wr").Result()
		_ = c.Close()
		if err == nil && len(addr) == 2 {
			port, _ := strconv.Atoi(addr[1])
			return port
		}
	}
	return 0
}

// ReplicatedCluster is a private Redis Cluster of three masters, each with
// replicas, started by deploy/local/replicated.sh on free ports. Every
// process is killed by PID when the test ends, even when it fails.
type ReplicatedCluster struct {
	t   testing.TB
	dir string
	// Masters are the ports of the nodes that started as masters; Ports
	// all the nodes' ports.
	Masters, Ports []int
	// URL is REDIS_URL for the services: the masters as seeds.
	URL string
	// Links are the proxies in front of the masters, when asked for, by
	// master port: the masters announce them, so clients and their
	// replicas reach each master through its link. Delay a link's
	// replication (Proxy.DelayReplication) to make the master's replicas
	// lag, cut it to cut them off.
	Links map[int]*Proxy
	// announced maps an announced (proxy) port back to its node's port.
	announced map[int]int
}

// StartReplicatedCluster starts a ReplicatedCluster with perMaster replicas
// for each of three masters; with linked, each master is reached through a
// Proxy of its own (ReplicatedCluster.Links).
func StartReplicatedCluster(t testing.TB, perMaster int, linked bool) *ReplicatedCluster {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("the failover tests run their own Redis Cluster, which is not installed: apt-get install -y redis-server (%v)", err)
	}
	c := &ReplicatedCluster{t: t, dir: t.TempDir(), Links: map[int]*Proxy{}, announced: map[int]int{}}
	n := 3 * (perMaster + 1)
	var ps, as []string
	for i := range n {
		p := FreePort(t)
		// The bus port is the port + 10000: keep both free and in range.
		for p+10000 > 65535 || !portFree(p+10000) {
			p = FreePort(t)
		}
		c.Ports = append(c.Ports, p)
		ps = append(ps, strconv.Itoa(p))
		a := ""
		if i < 3 {
			c.Masters = append(c.Masters, p)
			if linked {
				l := StartProxy(t, fmt.Sprintf("127.0.0.1:%d", p))
				c.Links[p] = l
				_, port, _ := strings.Cut(l.Addr(), ":")
				a = port
				ap, _ := strconv.Atoi(port)
				c.announced[ap] = p
			}
		}
		as = append(as, a)
	}
	t.Cleanup(c.down)
	out := runReplicated(t, "redis-cluster", "up", c.dir, strings.Join(ps, ","), strconv.Itoa(perMaster), strings.Join(as, ","))
	c.URL = envLine(t, out, "REDIS_URL")
	return c
}

// portFree reports whether nothing listens on port.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func (c *ReplicatedCluster) down() {
	matches, _ := filepath.Glob(filepath.Join(c.dir, "*.pid"))
	for _, f := range matches {
		killPIDFile(f)
	}
}

// Kill crashes the node on port (SIGKILL).
func (c *ReplicatedCluster) Kill(port int) {
	killPIDFile(filepath.Join(c.dir, fmt.Sprintf("redis-%d.pid", port)))
}

// MasterOf is the port of the node serving key's slot as master now, as
// the node on ask tells (0 if it cannot).
func (c *ReplicatedCluster) MasterOf(ctx context.Context, ask int, key string) int {
	cl := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", ask), MaxRetries: -1, DialTimeout: time.Second})
	defer cl.Close()
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return 0
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return 0
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			_, port, _ := strings.Cut(s.Nodes[0].Addr, ":")
			p, _ := strconv.Atoi(port)
			if real, ok := c.announced[p]; ok {
				return real
			}
			return p
		}
	}
	return 0
}

// logDir is a directory for a test's servers' files: under TESTENV_LOG_DIR,
// kept after the test for a post-mortem, when that is set; else the
// test's own temporary directory.
func logDir(t testing.TB, name string) string {
	if root := os.Getenv("TESTENV_LOG_DIR"); root != "" {
		if d, err := os.MkdirTemp(root, name+"-*"); err == nil {
			return d
		}
	}
	return t.TempDir()
}

// ReplOffset is a Redis node's master_repl_offset (INFO replication): it
// grows with every change the node makes or receives.
func ReplOffset(ctx context.Context, c *redis.Client) (int64, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "master_repl_offset:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no master_repl_offset in INFO replication:\n%s", info)
}
