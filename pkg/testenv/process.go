package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. It
// is drawn below the kernel's ephemeral range, so an outgoing connection of
// this or another test binary cannot take it between now and the listen;
// only another FreePort can, which is one chance in thousands, and
// StartService starts again on new ports when that happens.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		port := freePortFloor + rand.IntN(low-freePortFloor)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			_ = ln.Close()
			return port
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// freePortFloor is where FreePort starts drawing: above the ports servers
// usually own (5432, 5672, 6379, 15672...).
const freePortFloor = 20000

// ephemeralLow is the first port the kernel hands to outgoing connections
// (net.ipv4.ip_local_port_range), 32768 when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= freePortFloor+1000 {
		return 32768
	}
	return low
}

// RedisServer is a private redis-server process for fault tests: the shared
// server is never stopped, this one is.
type RedisServer struct {
	t    testing.TB
	Port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedisServer starts redis-server on a free port without persistence.
// It is stopped (by PID) when the test ends, even when the test fails.
func StartRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("this fault test runs its own redis-server, which is not installed: apt-get install -y redis-server (%v)", err)
	}
	s := &RedisServer{t: t, Port: FreePort(t), dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Start (re)starts the server on its port and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatalf("redis-server on %d already running", s.Port)
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if pingRedis(s.URL()) == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	s.t.Fatalf("redis-server on %d did not answer within 10s; log:\n%s", s.Port, log)
}

// Stop kills the server (SIGKILL: a crash, not a clean shutdown) and waits
// for it to exit. Stopping a stopped server does nothing.
func (s *RedisServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("redis-server pid %d did not exit after SIGKILL", s.cmd.Process.Pid)
	}
	s.cmd = nil
}

// WaitDown waits until nothing answers on the port.
func (s *RedisServer) WaitDown(ctx context.Context) error {
	for {
		if pingRedis(s.URL()) != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
