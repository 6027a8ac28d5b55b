package testenv

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ServiceOptions say how StartService runs a service binary.
type ServiceOptions struct {
	// Port is the HTTP port; 0 picks a free one. Give one when other
	// services need the address before this one runs.
	Port int
	// OpsPort is the ops listener's port (/metrics, /healthz, /readyz,
	// pprof); 0 picks a free one.
	OpsPort int
	// Env is added to the test's environment (HTTP_ADDR, OPS_ADDR and
	// LOG_LEVEL=debug are set already).
	Env map[string]string
	// NoWait returns as soon as the process runs, instead of when the ops
	// listener's /readyz answers 200.
	NoWait bool
	// StrictExit makes the test fail when, at cleanup, the process does not
	// exit 0 within the grace period of SIGTERM: a graceful shutdown is part
	// of what the test checks.
	StrictExit bool
	// Host runs the service in that network namespace, listening on the
	// Host's address (its URLs name it).
	Host *Host
}

// Service is a service binary (from BuildServices) running as a process of
// its own process group. It is stopped at cleanup, even when the test fails.
type Service struct {
	Name string
	URL  string // http://127.0.0.1:port, the API port
	// OpsURL is the ops listener, http://127.0.0.1:port: every service has
	// one (the admission-dispatcher has nothing else).
	OpsURL string

	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // the exit, once done is closed
}

// serviceGrace is how long Stop waits after SIGTERM before SIGKILL; above
// the services' default 15 s shutdown timeout.
const serviceGrace = 20 * time.Second

// StartService builds the services (once per test binary) and starts name;
// unless o.NoWait, it returns once the ops listener's /readyz answers 200,
// and fails the test with the log's tail if that takes over a minute or the
// process exits. When the process exits because a port it was given (0 in
// o) was taken in the meantime, it starts again on new ones.
func StartService(t testing.TB, name string, o ServiceOptions) *Service {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s := startService(t, name, o)
		if o.NoWait {
			return s
		}
		switch err := s.waitReady(time.Minute); {
		case err == nil:
			return s
		case errors.Is(err, errPortTaken) && (o.Port == 0 || o.OpsPort == 0) && attempt < 5:
			t.Logf("%s: %v; starting again on new ports", name, err)
		default:
			t.Fatalf("%s %v; log:\n%s", name, err, s.Tail())
		}
	}
}

var errPortTaken = errors.New("port taken")

func startService(t testing.TB, name string, o ServiceOptions) *Service {
	t.Helper()
	port, opsPort := o.Port, o.OpsPort
	if port == 0 {
		port = FreePort(t)
	}
	if opsPort == 0 {
		opsPort = FreePort(t)
	}
	// Under TESTENV_LOG_DIR the log outlives the test (logDir).
	logf, err := os.CreateTemp(logDir(t, name), fmt.Sprintf("%s-%d-*.log", name, port))
	if err != nil {
		t.Fatal(err)
	}
	bin, ip := filepath.Join(BuildServices(t), name), "127.0.0.1"
	cmd := exec.Command(bin)
	if o.Host != nil {
		// ip netns exec runs the binary in the namespace in its own place
		// (exec): the process is the service's.
		cmd, ip = exec.Command("ip", "netns", "exec", o.Host.Name, bin), o.Host.IP
	}
	cmd.Env = append(os.Environ(), fmt.Sprintf("HTTP_ADDR=%s:%d", ip, port), fmt.Sprintf("OPS_ADDR=%s:%d", ip, opsPort), "LOG_LEVEL=debug")
	for k, v := range o.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatal(err)
	}
	s := &Service{Name: name, URL: fmt.Sprintf("http://%s:%d", ip, port), OpsURL: fmt.Sprintf("http://%s:%d", ip, opsPort),
		cmd: cmd, log: logf.Name(), done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		_ = logf.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		if err := s.Stop(); err != nil && o.StrictExit {
			t.Errorf("%s: %v; log:\n%s", name, err, s.Tail())
		}
	})
	return s
}

// waitReady waits for /readyz to answer 200; the error says why it did not
// (errPortTaken when the process exited on a port in use).
func (s *Service) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for Readyz(s.OpsURL) != http.StatusOK {
		if !s.Alive() {
			if strings.Contains(s.Tail(), "address already in use") {
				return fmt.Errorf("exited before it was ready (%v): %w", s.err, errPortTaken)
			}
			return fmt.Errorf("exited before it was ready (%v)", s.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Readyz is the status /readyz answers at url, or 0 when nothing answers.
func Readyz(url string) int {
	c := http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(url + "/readyz")
	if err != nil {
		return 0
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// Alive reports whether the process still runs.
func (s *Service) Alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill is a crash: SIGKILL to the process group, then wait for the exit.
func (s *Service) Kill() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

// Stop sends SIGTERM and waits; after the grace period it kills. The error
// says how the process ended when that was not a clean exit 0 on SIGTERM.
// Stopping a process that already ended returns nil.
func (s *Service) Stop() error {
	if !s.Alive() {
		return nil
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
		if s.err != nil {
			return fmt.Errorf("exited with %v after SIGTERM", s.err)
		}
		return nil
	case <-time.After(serviceGrace):
		s.Kill()
		return fmt.Errorf("did not stop within %s of SIGTERM", serviceGrace)
	}
}

// Lines counts the lines of the process's output that contain substr.
func (s *Service) Lines(substr string) int {
	b, _ := os.ReadFile(s.log)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// Matching is the first max lines of the process's output that contain sub.
func (s *Service) Matching(sub string, max int) []string {
	b, _ := os.ReadFile(s.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) && len(out) < max {
			out = append(out, l)
		}
	}
	return out
}

// Tail is the last 40 lines of the process's output.
func (s *Service) Tail() string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
