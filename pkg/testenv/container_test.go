package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestContainerWithoutDockerFailsAtOnce: with DOCKER_HOST unset and no
// socket, starting a container says "no Docker engine" within a second and
// runs nothing (neither `go run` nor the helper), since this runs whenever
// a server is missing.
func TestContainerWithoutDockerFailsAtOnce(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	saved := dockerPaths
	dockerPaths = []string{filepath.Join(t.TempDir(), "docker.sock")}
	t.Cleanup(func() { dockerPaths = saved })
	spawned := 0
	savedCommand := helperCommand
	helperCommand = func(server string) (*exec.Cmd, error) {
		spawned++
		return exec.Command("false"), nil
	}
	t.Cleanup(func() { helperCommand = savedCommand })

	c := container{server: "redis"}
	began := time.Now()
	addr, err := c.start()
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "no Docker engine") {
		t.Fatalf("start = %q, %v; want an error naming \"no Docker engine\"", addr, err)
	}
	if took > time.Second {
		t.Errorf("start took %v, want under 1s", took)
	}
	if spawned != 0 {
		t.Errorf("helper commands made: %d, want 0", spawned)
	}
	if !strings.Contains(err.Error(), dockerPaths[0]) {
		t.Errorf("error %q does not name the socket it looked for, %s", err, dockerPaths[0])
	}
}

// TestHelperProtocol runs a stand-in for deploy/containers: the address on
// its first line is returned, it keeps running while stdin is open, and
// closing stdin (what the test binary's exit does) ends it with status 0.
func TestHelperProtocol(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo 127.0.0.1:1234; cat >/dev/null`)
	h, addr, err := startHelper(cmd, 10*time.Second)
	if err != nil {
		t.Fatalf("startHelper: %v", err)
	}
	if addr != "127.0.0.1:1234" {
		t.Errorf("addr = %q, want 127.0.0.1:1234", addr)
	}
	select {
	case <-h.exited:
		t.Fatalf("the helper exited while its stdin was open: %v", h.err)
	case <-time.After(200 * time.Millisecond):
	}
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("helper after its stdin closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the helper still runs 5s after its stdin closed")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code = %d, want 0", code)
	}
}

// TestHelperFailures: a helper that gives no usable address is ended, and
// the error says why, with the end of its stderr.
func TestHelperFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		timeout time.Duration
		want    []string
	}{
		{"exits with an error", `echo "containers: no Docker engine: none here" >&2; exit 1`, 10 * time.Second,
			[]string{"exit status 1", "before printing an address", "no Docker engine: none here"}},
		{"exits without a word", `exit 0`, 10 * time.Second,
			[]string{"exited with status 0", "stderr: (empty)"}},
		{"prints no address", `echo "still pulling" >&2; echo "pulling image"; cat >/dev/null`, 10 * time.Second,
			[]string{`first line "pulling image" is not host:port`, "still pulling"}},
		{"stays silent", `echo "pulling image" >&2; exec sleep 60`, 300 * time.Millisecond,
			[]string{"no address within 300ms", "pulling image"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("sh", "-c", tc.script)
			began := time.Now()
			h, addr, err := startHelper(cmd, tc.timeout)
			if err == nil {
				_ = h.Close()
				t.Fatalf("startHelper = %q, nil; want an error", addr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if cmd.ProcessState == nil {
				t.Error("startHelper returned before the process ended")
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Errorf("startHelper took %v", took)
			}
		})
	}
}

// TestStderrTailKeepsTheEnd: the error of a helper that wrote much carries
// the last bytes, where its error is.
func TestStderrTailKeepsTheEnd(t *testing.T) {
	tl := &tail{max: 16}
	for range 100 {
		_, _ = tl.Write([]byte("noise noise\n"))
	}
	_, _ = tl.Write([]byte("the error\n"))
	if got := tl.String(); !strings.HasSuffix(got, "the error") || len(got) > 16 {
		t.Errorf("tail = %q, want at most 16 bytes ending in \"the error\"", got)
	}
}

// TestNoModuleButTheHelperRequiresTestcontainers: testcontainers-go and the
// Docker client stay out of pkg and the services; only deploy/containers,
// which testenv runs as a command, requires them or builds their packages.
func TestNoModuleButTheHelperRequiresTestcontainers(t *testing.T) {
	work, err := workspaceFile()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(work)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := filepath.Dir(work)
	var mods []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "use (":
			in = true
		case in && line == ")":
			in = false
		case in && line != "":
			mods = append(mods, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(mods) < 2 {
		t.Fatalf("go.work lists %d modules: %v", len(mods), mods)
	}
	forbidden := []string{"github.com/testcontainers/", "github.com/moby/moby/"}
	for _, m := range mods {
		if filepath.Clean(m) == filepath.Join("deploy", "containers") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, m, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		for _, dep := range forbidden {
			if strings.Contains(string(b), dep) {
				t.Errorf("%s requires %s: only deploy/containers may depend on it", filepath.Join(m, "go.mod"), dep)
			}
		}
		// go.sum may name a module that is only in the graph (Prometheus's
		// rule engine brings the Docker client's go.mod along); what must
		// not happen is a package of it being built into a binary or test.
		cmd := exec.Command("go", "list", "-deps", "-test", "./...")
		cmd.Dir = filepath.Join(root, m)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps -test in %s: %v", m, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			for _, dep := range forbidden {
				if strings.HasPrefix(pkg, dep) {
					t.Errorf("%s builds %s: only deploy/containers may depend on it", m, pkg)
				}
			}
		}
	}
}
