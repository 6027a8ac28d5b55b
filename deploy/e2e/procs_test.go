package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestMain runs the suite, then audits the shared Redis: after a full run
// no key under wr: may live forever unless the layout says so, and
// wr:queues may list only live queues (keys_test.go).
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilt()
	if err := auditSharedRedis(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: Redis key audit:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// start runs a service binary on a free port and waits until it is ready.
// A service that does not shut down cleanly at the end fails the test.
func start(t *testing.T, name string, env map[string]string) *testenv.Service {
	t.Helper()
	return startOn(t, name, 0, env)
}

// startOn is start on a port chosen beforehand, for services whose address
// others need before they run.
func startOn(t *testing.T, name string, port int, env map[string]string) *testenv.Service {
	t.Helper()
	return testenv.StartService(t, name, testenv.ServiceOptions{Port: port, Env: env, StrictExit: true})
}
