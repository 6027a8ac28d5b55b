package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/waitingroom/waitingroom/"

// infrastructure is what the rules of the waiting room must not depend
// on: the HTTP framework, the Redis, RabbitMQ and Postgres clients, the
// wire format and the metrics library. Ports and adapters import them;
// the domain declares interfaces they implement.
var infrastructure = []string{
	"github.com/gin-gonic/",
	"github.com/redis/go-redis/",
	"github.com/rabbitmq/amqp091-go",
	"gorm.io/",
	"github.com/jackc/pgx",
	"google.golang.org/protobuf",
	"github.com/prometheus/",
}

// rule: pkg (under the workspace's module path) must not import any path
// starting with one of forbidden, directly or through any other package.
type rule struct {
	pkg       string
	forbidden []string
}

var rules = []rule{
	// The domain: enter and position, the enter challenge, admission,
	// ordering, restoration and fan-out.
	{"pkg/queue", infrastructure},
	{"pkg/queue/queuetest", infrastructure},
	{"pkg/challenge", infrastructure},
	{"services/queue-gateway/internal/app", infrastructure},
	{"services/admission-dispatcher/internal/dispatch", infrastructure},
	{"services/admission-dispatcher/internal/restore", infrastructure},
	{"services/order-service/internal/order", infrastructure},
	{"services/notification-service/internal/hub", infrastructure},
	{"services/notification-service/internal/stream", infrastructure},
	// The domain's fakes and contract suites: as pure as the domain, so
	// a unit test over a fake needs no server (TestTestSupportOnlyInTests
	// keeps them out of the binaries).
	{"services/order-service/internal/order/ordertest", infrastructure},
	{"services/admission-dispatcher/internal/restore/restoretest", infrastructure},
	{"services/admission-dispatcher/internal/dispatch/dispatchtest", infrastructure},
	{"services/notification-service/internal/stream/streamtest", infrastructure},
	// The event contract: protobuf is its format, but a consumer of the
	// contract needs no broker client, HTTP framework or database.
	{"pkg/events", slices.DeleteFunc(slices.Clone(infrastructure), func(p string) bool { return p == "google.golang.org/protobuf" })},
}

// debt lists the imports a package still has against its rule, each with
// why; the test fails when one is gone too, so the list only shrinks.
var debt = map[string]map[string]string{}

// pkgInfo is what go list says of one package.
type pkgInfo struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Error      *struct{ Err string }
}

// TestImportRules runs go list -deps over every package of the rules and
// fails naming the package, the forbidden import and the chain of imports
// that brings it in.
func TestImportRules(t *testing.T) {
	roots := make([]string, len(rules))
	for i, r := range rules {
		roots[i] = mod + r.pkg
	}
	graph := goListDeps(t, roots)
	for _, r := range rules {
		for _, prefix := range r.forbidden {
			chain := importChain(graph, mod+r.pkg, prefix)
			why, owed := debt[r.pkg][prefix]
			switch {
			case chain != nil && !owed:
				t.Errorf("%s imports %s (forbidden: %s): %s", r.pkg, chain[len(chain)-1], prefix, strings.Join(chain, " -> "))
			case chain == nil && owed:
				t.Errorf("%s no longer imports %s: remove it from debt (%s)", r.pkg, prefix, why)
			case chain != nil:
				t.Logf("known debt: %s imports %s (%s): %s", r.pkg, prefix, why, strings.Join(chain, " -> "))
			}
		}
	}
	for pkg := range debt {
		if !slices.ContainsFunc(rules, func(r rule) bool { return r.pkg == pkg }) {
			t.Errorf("debt names %s, which no rule covers", pkg)
		}
	}
}

// goListDeps is the import graph of roots and everything they import, by
// import path; the standard library is left out.
func goListDeps(t *testing.T, roots []string) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	for _, p := range goList(t, append([]string{"-deps"}, roots...)...) {
		if !p.Standard {
			graph[p.ImportPath] = p.Imports
		}
	}
	for _, r := range roots {
		if _, ok := graph[r]; !ok {
			t.Fatalf("go list did not list %s", r)
		}
	}
	return graph
}

// goList runs go list -json with args (flags, then packages) and returns
// what it says of each package, failing the test on any package's error.
func goList(t *testing.T, args ...string) []pkgInfo {
	t.Helper()
	args = append([]string{"list", "-json=ImportPath,Imports,Error,Standard"}, args...)
	cmd := exec.Command("go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s(run it inside the workspace of go.work: the rules name packages of every module)",
			strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// importChain is the shortest chain of imports from root to a package
// whose path starts with prefix, or nil when there is none.
func importChain(graph map[string][]string, root, prefix string) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != root && strings.HasPrefix(p, prefix) {
			var chain []string
			for ; p != ""; p = parent[p] {
				chain = append(chain, strings.TrimPrefix(p, mod))
			}
			slices.Reverse(chain)
			return chain
		}
		for _, next := range graph[p] {
			if _, seen := parent[next]; !seen {
				parent[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}
