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

// FreePort returns a TCP port on 127.0.0.1 that is free and reserved for
// t. It is drawn below the kernel's ephemeral range, so an outgoing
// connection of this or another test binary cannot take it; and it is
// reserved by a lock on a file named after it in portLocks, held until
// t's cleanup (or the binary's death), which every FreePort of every test
// binary respects: two packages never get the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, release := freePorts(t, 1)
	t.Cleanup(release)
	return port
}

// pickPort picks a candidate port in [lo, hi); its test replaces it.
var pickPort = func(lo, hi int) int { return lo + rand.IntN(hi-lo) }

// freePorts is FreePort for a block of n consecutive ports: the first, and
// the release of their reservations, for the caller to call once nothing
// listens on them any more.
func freePorts(t testing.TB, n int) (int, func()) {
	t.Helper()
	low := ephemeralLow() - n
	for range 1000 {
		base := pickPort(freePortFloor, low)
		var locks []*os.File
		release := func() {
			for _, l := range locks {
				_ = l.Close()
			}
		}
		for p := base; p < base+n; p++ {
			lock, ok := reservePort(t, p)
			if !ok {
				break
			}
			locks = append(locks, lock)
			// Reserved but in use (a server outside the reservations, or
			// one a killed run left behind): not free. The lock is in
			// locks, so the block's count falls short and it is released.
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				locks = locks[:len(locks)-1]
				_ = lock.Close()
				break
			}
			_ = ln.Close()
		}
		if len(locks) == n {
			return base, release
		}
		release()
	}
	t.Fatalf("free port: none of 1000 blocks of %d between %d and %d was free and unreserved", n, freePortFloor, low+n)
	return 0, nil
}

// portLocks is where FreePort's reservations live, one file per port,
// shared by every user of the machine (sticky, like /tmp).
var portLocks = filepath.Join(os.TempDir(), "waitingroom-test-ports")

// reservePort takes the lock of port without waiting: false when another
// test holds it. The file is opened read-only (flock needs no more), so a
// file another user made serves as well.
func reservePort(t testing.TB, port int) (*os.File, bool) {
	if err := os.MkdirAll(portLocks, 0o777); err != nil {
		t.Fatalf("free port: %v", err)
	}
	_ = os.Chmod(portLocks, 0o777|os.ModeSticky) // fails harmlessly when another user made it
	name := filepath.Join(portLocks, strconv.Itoa(port))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
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
