package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// binaries builds every service once per test binary.
func binaries(t testing.TB) string { return testenv.BuildServices(t) }

// proc is a service process the test started; it is stopped by PID at
// cleanup, even when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	url  string
}

func start(t *testing.T, name string, env map[string]string) *proc {
	t.Helper()
	return startOn(t, name, testenv.FreePort(t), env)
}

// startOn starts a service on a port chosen beforehand (for services whose
// address others need before they run) and waits until it is ready.
func startOn(t *testing.T, name string, port int, env map[string]string) *proc {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.log", name, port)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binaries(t), name))
	cmd.Env = append(os.Environ(), "HTTP_ADDR=127.0.0.1:"+fmt.Sprint(port), "LOG_LEVEL=debug")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, log: logf, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	t.Cleanup(func() { p.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(p.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 60s; log:\n%s", name, p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits for a graceful exit, and kills after 20 s.
func (p *proc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM; log:\n%s", p.name, err, p.tail())
		}
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Errorf("%s did not stop within 20s of SIGTERM", p.name)
	}
	_ = p.log.Close()
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log.Name())
	lines := strings.Split(string(b), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
