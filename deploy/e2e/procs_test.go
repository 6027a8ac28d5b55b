package e2e

import (
	"os"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilt()
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
