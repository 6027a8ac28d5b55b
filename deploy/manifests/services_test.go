package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// service is what the deployment files must agree on about one service.
type service struct {
	name string
	// port is HTTP_ADDR's default (docs/CONFIGURATION.md), the API port:
	// the container port named http, the Service and EXPOSE use it. 0: no
	// API (the dispatcher), so no HTTP_ADDR, no such port, no Service.
	port int
	// opsPort is OPS_ADDR's default, the ops listener (/metrics, /healthz,
	// /readyz): the container port named ops, the probes, the Prometheus
	// annotations and EXPOSE use it; no Service and no Ingress may.
	opsPort int
	// shutdown is SHUTDOWN_TIMEOUT's default (one for every service, in
	// pkg/config; a manifest may set less).
	shutdown time.Duration
	// public services are reached through the Ingress.
	public bool
	// hpa: scaled by a HorizontalPodAutoscaler (everything but the dispatcher,
	// whose extra replicas would only be standbys).
	hpa bool
	// auth: verifies user JWTs, so it needs AUTH_JWT_SECRET.
	auth bool
	// amqp, database: the servers it talks to besides Redis.
	amqp, database bool
}

var services = []service{
	{name: "queue-gateway", port: 8080, opsPort: 9080, shutdown: 15 * time.Second, public: true, hpa: true, auth: true},
	{name: "order-service", port: 8081, opsPort: 9081, shutdown: 15 * time.Second, public: true, hpa: true, auth: true, amqp: true, database: true},
	{name: "notification-service", port: 8082, opsPort: 9082, shutdown: 15 * time.Second, public: true, hpa: true, auth: true, amqp: true},
	{name: "admission-dispatcher", opsPort: 9083, shutdown: 15 * time.Second, amqp: true},
}

func serviceNamed(name string) (service, bool) {
	for _, s := range services {
		if s.name == name {
			return s, true
		}
	}
	return service{}, false
}

// repoRoot is the repository root: two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("repository root not found above %s: %v", root, err)
	}
	return root
}

// goSource is one non-test Go file of pkg/ or services/.
type goSource struct {
	path string // relative to the repository root, slash-separated
	text string
}

var (
	sourcesOnce sync.Once
	sources     []goSource
	sourcesErr  error
)

// goSources reads every non-test .go file under pkg/ and services/.
func goSources(t testing.TB) []goSource {
	t.Helper()
	root := repoRoot(t)
	sourcesOnce.Do(func() {
		for _, dir := range []string{"pkg", "services"} {
			err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				sources = append(sources, goSource{path: filepath.ToSlash(rel), text: string(b)})
				return nil
			})
			if err != nil {
				sourcesErr = err
				return
			}
		}
	})
	if sourcesErr != nil {
		t.Fatal(sourcesErr)
	}
	if len(sources) == 0 {
		t.Fatal("no Go sources found under pkg/ and services/")
	}
	return sources
}

// envDefault finds the one `env:"NAME" envDefault:"..."` tag of a service's
// own sources (services/<name>/...).
func envDefault(t *testing.T, svc, name string) string {
	t.Helper()
	found := envDefaults(t, svc, name)
	if len(found) != 1 {
		t.Fatalf("%s: want exactly one %s default in its sources, found %q", svc, name, found)
	}
	return found[0]
}

// envDefaults lists the `env:"NAME" envDefault:"..."` tags of a service's
// own sources.
func envDefaults(t *testing.T, svc, name string) []string {
	t.Helper()
	re := regexp.MustCompile(`env:"` + regexp.QuoteMeta(name) + `"\s+envDefault:"([^"]*)"`)
	var found []string
	for _, src := range goSources(t) {
		if !strings.HasPrefix(src.path, "services/"+svc+"/") {
			continue
		}
		for _, m := range re.FindAllStringSubmatch(src.text, -1) {
			found = append(found, m[1])
		}
	}
	return found
}

// sharedDefault is the envDefault of a setting pkg/config declares for
// every service.
func sharedDefault(t *testing.T, name string) string {
	t.Helper()
	re := regexp.MustCompile(`env:"` + regexp.QuoteMeta(name) + `"\s+envDefault:"([^"]*)"`)
	var found []string
	for _, src := range goSources(t) {
		if strings.HasPrefix(src.path, "pkg/config/") {
			for _, m := range re.FindAllStringSubmatch(src.text, -1) {
				found = append(found, m[1])
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s default in pkg/config, found %q", name, found)
	}
	return found[0]
}

// TestServiceFacts checks the table above against the services' own
// configuration, so the deployment tests below test against the truth.
func TestServiceFacts(t *testing.T) {
	for _, s := range services {
		if s.port == 0 {
			if found := envDefaults(t, s.name, "HTTP_ADDR"); len(found) != 0 {
				t.Errorf("%s: HTTP_ADDR %q in the sources, the deployment files assume it has no API port", s.name, found)
			}
		} else if got, want := envDefault(t, s.name, "HTTP_ADDR"), ":"+strconv.Itoa(s.port); got != want {
			t.Errorf("%s: HTTP_ADDR default is %q in the sources, the deployment files assume %q", s.name, got, want)
		}
		if got, want := envDefault(t, s.name, "OPS_ADDR"), ":"+strconv.Itoa(s.opsPort); got != want {
			t.Errorf("%s: OPS_ADDR default is %q in the sources, the deployment files assume %q", s.name, got, want)
		}
		if found := envDefaults(t, s.name, "SHUTDOWN_TIMEOUT"); len(found) != 0 {
			t.Errorf("%s: a SHUTDOWN_TIMEOUT default %q of its own; it is config.HTTP's, one for every service", s.name, found)
		}
		d, err := time.ParseDuration(sharedDefault(t, "SHUTDOWN_TIMEOUT"))
		if err != nil {
			t.Fatalf("%s: SHUTDOWN_TIMEOUT default: %v", s.name, err)
		}
		if d != s.shutdown {
			t.Errorf("%s: SHUTDOWN_TIMEOUT default is %s in the sources, the deployment files assume %s", s.name, d, s.shutdown)
		}
		if _, err := os.Stat(filepath.Join(repoRoot(t), "services", s.name, "main.go")); err != nil {
			t.Errorf("%s: no main package: %v", s.name, err)
		}
	}
}

// envNameKnown says whether an environment variable name is read somewhere
// in pkg/ or services/ (an env tag, or the name in a message about it).
func envNameKnown(t testing.TB, name string) bool {
	t.Helper()
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	for _, src := range goSources(t) {
		if re.MatchString(src.text) {
			return true
		}
	}
	return false
}
