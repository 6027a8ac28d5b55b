package testenv

import (
	"context"
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
// replicas (see StartRedisClusterNodes). It returns the seed list REDIS_URL takes for a
// cluster ("127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3") once every node reports
// cluster_state:ok. The processes are killed (by PID) when the test ends,
// even when it fails.
func StartRedisCluster(t testing.TB) string {
	t.Helper()
	return strings.Join(StartRedisClusterNodes(t, clusterMasters), ",")
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
