package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// missingLine is how services-up.sh names what it lacks.
var missingLine = regexp.MustCompile(`^missing: \S+ \(install it: apt-get install -y (\S+)\)$`)

// TestServicesUpNamesWhatIsMissing: on a machine with none of the servers
// and tools make run and make test need (a PATH holding bash alone),
// services-up.sh without --install names each missing one with the Debian
// package that brings it, and fails before it starts anything; with --tests
// it names the test tools too.
func TestServicesUpNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bash, filepath.Join(bin, "bash")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(testenv.Root(), "deploy", "local", "services-up.sh")
	for _, tc := range []struct {
		args    []string
		missing []string
	}{
		{nil, []string{"redis-server", "redis-tools", "rabbitmq-server", "postgresql", "postgresql-client", "curl", "jq"}},
		{[]string{"--tests"}, []string{"redis-server", "redis-tools", "rabbitmq-server", "postgresql", "postgresql-client", "curl", "jq", "chromium", "iproute2", "npm"}},
		{[]string{"--fonts"}, []string{"redis-server", "redis-tools", "rabbitmq-server", "postgresql", "postgresql-client", "curl", "jq", "fontconfig"}},
	} {
		cmd := exec.Command(bash, append([]string{script}, tc.args...)...)
		// No sbin added, and no server answering on the ports asked.
		cmd.Env = []string{"PATH=" + bin, "SBIN=", fmt.Sprintf("REDIS_PORT=%d", testenv.FreePort(t)),
			fmt.Sprintf("AMQP_PORT=%d", testenv.FreePort(t)), fmt.Sprintf("PG_PORT=%d", testenv.FreePort(t))}
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
			t.Fatalf("services-up.sh %v with nothing installed: exit %d (%v), want 1; output:\n%s", tc.args, code, err, out)
		}
		var named []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			m := missingLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("services-up.sh %v: line %q, want only \"missing: <command> (install it: apt-get install -y <package>)\" lines", tc.args, line)
			}
			named = append(named, m[1])
		}
		if strings.Join(named, " ") != strings.Join(tc.missing, " ") {
			t.Errorf("services-up.sh %v named %v, want %v", tc.args, named, tc.missing)
		}
	}
}
