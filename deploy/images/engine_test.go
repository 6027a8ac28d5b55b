//go:build images

package images

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// engine is the container engine `make images` used, as
// deploy/images/engine.sh picks it ($ENGINE, else podman, else docker);
// asked once per test binary.
func engine(t testing.TB) string {
	t.Helper()
	e, err := pickEngine()
	if err != nil {
		t.Fatalf("%v: deploy/images/podman-setup.sh --install, then make images-test", err)
	}
	return e
}

var pickEngine = sync.OnceValues(func() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	out, err := exec.Command(filepath.Join(filepath.Dir(file), "engine.sh")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("engine.sh: %s", bytes.TrimSpace(ee.Stderr))
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
})

// run runs the engine with args and returns its standard output, trimmed;
// the error carries its standard error.
func run(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return runIn(t, "", args...)
}

func runIn(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(engine(t), args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", engine(t), strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// must is run, failing the test on an error.
func must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// repoRoot is the repository's root: two folders up from this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// suffix is a random name part, so that containers of two runs never meet.
func suffix(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// requireImage fails the test, saying how to build it, when image is not
// in the engine's store.
func requireImage(t testing.TB, image string) {
	t.Helper()
	if _, err := run(t, "image", "inspect", image); err != nil {
		t.Fatalf("image %s is not built: run `make images-test` (or `make images` and deploy/images/infra-images.sh): %v", image, err)
	}
}

// container is one started container, removed at cleanup; its log is
// printed when the test failed.
type container struct {
	t    testing.TB
	name string
}

// startContainer runs image detached with the engine flags given and
// returns once the engine has started it.
func startContainer(t testing.TB, name string, flags []string, image string, args ...string) *container {
	t.Helper()
	c, err := tryContainer(t, name, flags, image, args...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tryContainer is startContainer returning the engine's error.
func tryContainer(t testing.TB, name string, flags []string, image string, args ...string) (*container, error) {
	t.Helper()
	c := &container{t: t, name: name}
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := run(t, "logs", "--tail", "40", name); err == nil {
				t.Logf("%s log:\n%s", name, out)
			}
		}
		_, _ = run(t, "rm", "-f", "-t", "0", name)
	})
	cmd := append([]string{"run", "-d", "--name", name}, flags...)
	cmd = append(cmd, image)
	if _, err := run(t, append(cmd, args...)...); err != nil {
		return nil, fmt.Errorf("the container does not start: %w", err)
	}
	return c, nil
}

// inspect is one field of the container's inspection (a Go template).
func (c *container) inspect(format string) string {
	c.t.Helper()
	return must(c.t, "inspect", "--format", format, c.name)
}

// procStatus is the named fields of /proc/<pid>/status of the container's
// main process, as this machine sees it.
func (c *container) procStatus(fields ...string) (map[string]string, error) {
	pid := c.inspect("{{.State.Pid}}")
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, fmt.Errorf("the container's process %s: %w", pid, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, f := range fields {
			if k == f {
				out[k] = strings.Join(strings.Fields(v), " ")
			}
		}
	}
	return out, nil
}

// rootMountOptions is the mount options of the container's root
// filesystem, from /proc/<pid>/mountinfo.
func (c *container) rootMountOptions() (string, error) {
	pid := c.inspect("{{.State.Pid}}")
	b, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return f[5], nil
		}
	}
	return "", errors.New("no root mount in mountinfo")
}

// stop sends SIGTERM and waits up to grace for the exit (the engine kills
// after that); it returns how long the exit took and the exit code.
func (c *container) stop(grace time.Duration) (time.Duration, int, error) {
	start := time.Now()
	if _, err := run(c.t, "stop", "-t", strconv.Itoa(int(grace/time.Second)), c.name); err != nil {
		return 0, 0, err
	}
	took := time.Since(start)
	code, err := strconv.Atoi(c.inspect("{{.State.ExitCode}}"))
	return took, code, err
}

// imageFile is one entry of an image's filesystem.
type imageFile struct {
	path string
	mode os.FileMode
	size int64
	uid  int
	link string
}

// imageFiles lists image's filesystem: a container is created (not
// started) and exported as a tar stream, which works the same with podman
// and docker.
func imageFiles(t testing.TB, image string) ([]imageFile, error) {
	t.Helper()
	name := "wr-files-" + suffix(t)
	if _, err := run(t, "create", "--name", name, image); err != nil {
		return nil, err
	}
	defer func() { _, _ = run(t, "rm", "-f", name) }()
	cmd := exec.Command(engine(t), "export", name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var files []imageFile
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("export %s: %w", image, err)
		}
		files = append(files, imageFile{path: "/" + strings.TrimPrefix(filepath.Clean("/"+h.Name), "/"),
			mode: h.FileInfo().Mode(), size: h.Size, uid: h.Uid, link: h.Linkname})
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("export %s: %v: %s", image, err, stderr.String())
	}
	return files, nil
}
