package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// helper is a running deploy/containers process (or, in tests, a stand-in
// speaking its protocol): it printed host:port on its first line of stdout
// and keeps its server until its stdin reaches end of file.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail
	exited chan struct{} // closed once the process has been waited for
	err    error         // Wait's result, read after exited is closed
}

// helperWaitDelay is how long Wait waits, after the process exited, for
// stderr to close: `go run` killed on a timeout leaves the helper binary,
// which holds it, removing its container.
const helperWaitDelay = 5 * time.Second

// startHelper starts cmd and returns the address on its first line of
// stdout. Without one within timeout, or when the line is not host:port,
// the process is ended; the error then carries the end of its stderr. The
// process keeps running until Close, or until this process exits and the
// kernel closes the write end of the stdin pipe.
func startHelper(cmd *exec.Cmd, timeout time.Duration) (*helper, string, error) {
	h := &helper{cmd: cmd, stderr: &tail{max: 4 << 10}, exited: make(chan struct{})}
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, "", err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.Stderr = h.stderr
	cmd.WaitDelay = helperWaitDelay
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	first := make(chan string, 1) // closed without a line when stdout ends first
	go func() {
		r := bufio.NewReader(stdout)
		if line, err := r.ReadString('\n'); err == nil {
			first <- line
		}
		close(first)
		// Whatever else it prints is read, so that it never blocks on a
		// full pipe.
		_, _ = io.Copy(io.Discard, r)
		h.err = cmd.Wait()
		close(h.exited)
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line, ok := <-first:
		if !ok {
			h.kill()
			return nil, "", fmt.Errorf("%s before printing an address; stderr: %s", h.exitStatus(), h.stderr)
		}
		addr := strings.TrimSpace(line)
		if _, _, err := net.SplitHostPort(addr); err != nil {
			h.kill()
			return nil, "", fmt.Errorf("first line %q is not host:port; stderr: %s", addr, h.stderr)
		}
		return h, addr, nil
	case <-timer.C:
		h.kill()
		return nil, "", fmt.Errorf("no address within %v; stderr: %s", timeout, h.stderr)
	}
}

// Close closes the helper's stdin, as the exit of the test binary does, and
// waits for it to remove its server and exit.
func (h *helper) Close() error {
	_ = h.stdin.Close()
	<-h.exited
	return h.err
}

// kill ends a helper that failed: stdin closed first, so that a helper
// binary outliving a killed `go run` still removes what it started.
func (h *helper) kill() {
	_ = h.stdin.Close()
	_ = h.cmd.Process.Kill()
	<-h.exited
}

// exitStatus describes how the process ended; valid after exited is closed.
func (h *helper) exitStatus() string {
	if h.err == nil {
		return "exited with status 0"
	}
	return h.err.Error()
}

// tail keeps the last max bytes written to it: the end of the helper's
// stderr, where its error is.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.b)); s != "" {
		return s
	}
	return "(empty)"
}
