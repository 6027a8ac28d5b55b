package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// container is a server in Docker, shared by the tests of one binary. It is
// started by deploy/containers, a module of its own run with `go run`, so
// that testcontainers-go and the Docker client it brings are dependencies
// of that module only, not of pkg and of every service whose tests import
// testenv.
type container struct {
	server string // what deploy/containers starts: redis, postgres or rabbitmq

	once sync.Once
	// proc is kept for the life of the test binary: the helper keeps its
	// container until its stdin, held here, is closed, and an unreachable
	// pipe would be closed by its finalizer.
	proc *helper
	addr string // host:port
	err  error
}

// helperPackage is the command that starts a container and keeps it while
// its stdin stays open.
const helperPackage = "github.com/waitingroom/waitingroom/deploy/containers"

// helperTimeout bounds building the helper, pulling the image and waiting
// for the server to be ready.
const helperTimeout = 3 * time.Minute

// start starts the container once per test binary and returns its host:port.
func (c *container) start() (string, error) {
	c.once.Do(func() {
		if err := dockerHinted(); err != nil {
			c.err = err
			return
		}
		cmd, err := helperCommand(c.server)
		if err != nil {
			c.err = fmt.Errorf("start %s container: %w", c.server, err)
			return
		}
		if c.proc, c.addr, c.err = startHelper(cmd, helperTimeout); c.err != nil {
			c.err = fmt.Errorf("start %s container: %w", c.server, c.err)
		}
	})
	return c.addr, c.err
}

// dockerPaths are the files whose presence says a Docker engine may answer
// when DOCKER_HOST is unset: where testcontainers-go looks for one (the
// default socket, the rootless ones, its properties file, which can name a
// host). A variable so that a test can point it at a path that does not
// exist.
var dockerPaths = defaultDockerPaths()

func defaultDockerPaths() []string {
	paths := []string{"/var/run/docker.sock", fmt.Sprintf("/run/user/%d/docker.sock", os.Getuid())}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		paths = append(paths, filepath.Join(dir, "docker.sock"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths,
			filepath.Join(home, ".docker", "run", "docker.sock"),
			filepath.Join(home, ".docker", "desktop", "docker.sock"),
			filepath.Join(home, ".testcontainers.properties"))
	}
	return paths
}

// dockerHinted says whether a Docker engine may answer at all, without
// spawning anything: it runs whenever a server is missing, and building and
// running the helper only to hear that there is no Docker would cost
// seconds each time.
func dockerHinted() error {
	if os.Getenv("DOCKER_HOST") != "" {
		return nil
	}
	for _, p := range dockerPaths {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
	}
	return fmt.Errorf("no Docker engine: DOCKER_HOST is unset and none of %s exists", strings.Join(dockerPaths, ", "))
}

// helperCommand returns the command that runs deploy/containers for server;
// a variable so that a test can see it is not called.
var helperCommand = goRunHelper

// goRunHelper runs the helper with `go run` in the workspace, which holds its
// module (and the go.sum that pins testcontainers-go).
func goRunHelper(server string) (*exec.Cmd, error) {
	work, err := workspaceFile()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "run", helperPackage, server)
	cmd.Dir = filepath.Dir(work)
	cmd.Env = append(os.Environ(), "GOWORK="+work)
	return cmd, nil
}

// workspaceFile returns the go.work the tests run in: GOWORK when it names
// one, else the first go.work above the working directory (go test runs a
// test binary in its package's directory).
func workspaceFile() (string, error) {
	if w := os.Getenv("GOWORK"); w != "" && w != "off" {
		return filepath.Abs(w)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		f := filepath.Join(dir, "go.work")
		if _, err := os.Stat(f); err == nil {
			return f, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no go.work in %s or above: %s runs from the workspace", wd, helperPackage)
		}
	}
}
