package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Services are the service binaries end-to-end tests run.
var Services = []string{"queue-gateway", "admission-dispatcher", "order-service", "notification-service"}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Root is the repository root, found from this file's location.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildServices builds every service once per test binary and returns the
// directory holding the binaries. RemoveBuilt deletes it (from TestMain).
func BuildServices(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "waitingroom-bin-"); buildErr != nil {
			return
		}
		for _, s := range Services {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, s), "./services/"+s)
			cmd.Dir = Root()
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", s, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// RemoveBuilt deletes the binaries BuildServices made, if any.
func RemoveBuilt() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}
