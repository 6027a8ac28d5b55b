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

// clusterMasters is the number of masters StartRedisCluster creates.
const clusterMasters = 3

// StartRedisCluster starts a private Redis Cluster of three masters and no
// replicas: redis-server processes on free ports, joined with
// redis-cli --cluster create. It returns the seed list REDIS_URL takes for a
// cluster ("127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3") once every node reports
// cluster_state:ok. The processes are killed (by PID) when the test ends,
// even when it fails.
func StartRedisCluster(t testing.TB) string {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("this test runs its own Redis Cluster, which needs %s: apt-get install -y redis-server redis-tools (%v)", bin, err)
		}
	}
	dir := t.TempDir()
	addrs := make([]string, clusterMasters)
	used := map[int]bool{}
	free := func() int {
		for {
			if p := FreePort(t); !used[p] {
				used[p] = true
				return p
			}
		}
	}
	for i := range addrs {
		// The cluster bus port is set explicitly: port+10000 may not exist.
		port, bus := free(), free()
		addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
		startClusterNode(t, dir, port, bus)
	}
	for _, a := range addrs {
		waitListening(t, dir, a)
		waitClusterNode(t, dir, a, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() })
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}

	for _, a := range addrs {
		waitClusterNode(t, dir, a, func(ctx context.Context, c *redis.Client) error {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", "cluster_known_nodes:" + strconv.Itoa(clusterMasters)} {
				if !strings.Contains(info, want) {
					return fmt.Errorf("cluster info lacks %q:\n%s", want, info)
				}
			}
			return nil
		})
	}
	return strings.Join(addrs, ",")
}

// startClusterNode starts one cluster-enabled redis-server in its own process
// group and registers its kill.
func startClusterNode(t testing.TB, dir string, port, bus int) {
	t.Helper()
	p := strconv.Itoa(port)
	cmd := exec.Command("redis-server",
		"--port", p, "--bind", "127.0.0.1",
		"--cluster-enabled", "yes",
		"--cluster-port", strconv.Itoa(bus),
		"--cluster-config-file", filepath.Join(dir, "nodes-"+p+".conf"),
		"--cluster-node-timeout", "5000",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis-"+p+".log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server on %d: %v", port, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("redis-server pid %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
}

// waitListening waits until addr accepts TCP connections, so the client's
// pool does not log the refused dials of a node still starting.
func waitListening(t testing.TB, dir, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, port, _ := strings.Cut(addr, ":")
	log, _ := os.ReadFile(filepath.Join(dir, "redis-"+port+".log"))
	t.Fatalf("redis cluster node %s not listening within 10s; log:\n%s", addr, log)
}

// waitClusterNode polls the node at addr until check passes (10 s at most).
func waitClusterNode(t testing.TB, dir, addr string, check func(context.Context, *redis.Client) error) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = check(ctx, c)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, port, _ := strings.Cut(addr, ":")
	log, _ := os.ReadFile(filepath.Join(dir, "redis-"+port+".log"))
	t.Fatalf("redis cluster node %s not ready within 10s: %v; log:\n%s", addr, err, log)
}
