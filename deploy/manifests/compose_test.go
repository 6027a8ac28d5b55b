package manifests

import (
	"context"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads docker-compose.yml as `docker compose` does (schema
// validation included: an unknown key fails), with an empty environment so
// nothing on this machine leaks in.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	details := types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: types.Mapping{},
	}
	p, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("waitingroom", true)
	})
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

func envOf(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

func TestCompose(t *testing.T) {
	p := loadCompose(t)
	root := repoRoot(t)

	infra := map[string]string{
		"redis":    "redis:7-alpine",
		"rabbitmq": "rabbitmq:3.13-management",
		"postgres": "postgres:15-alpine",
	}
	want := []string{"jaeger"}
	for name := range infra {
		want = append(want, name)
	}
	for _, s := range services {
		want = append(want, s.name)
	}
	slices.Sort(want)
	if got := p.ServiceNames(); !slices.Equal(sortedCopy(got), want) {
		t.Fatalf("services %v, want %v", sortedCopy(got), want)
	}

	// Infrastructure: the pinned images, each with a healthcheck the app
	// services can wait for.
	for name, image := range infra {
		s := p.Services[name]
		if s.Image != image {
			t.Errorf("%s: image %q, want %q", name, s.Image, image)
		}
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) < 2 || (s.HealthCheck.Test[0] != "CMD" && s.HealthCheck.Test[0] != "CMD-SHELL") {
			t.Errorf("%s: no usable healthcheck: %+v", name, s.HealthCheck)
		}
	}
	if cmd := strings.Join(p.Services["redis"].Command, " "); !strings.Contains(cmd, "--save ") || !strings.Contains(cmd, "--appendonly no") {
		t.Errorf("redis: command %q, want no persistence (--save \"\" --appendonly no), as the local setup runs it", cmd)
	}
	pg := p.Services["postgres"]
	if envOf(pg, "POSTGRES_HOST_AUTH_METHOD") != "trust" || envOf(pg, "POSTGRES_DB") != "waitingroom" {
		t.Errorf("postgres: environment %v, want trust auth and database waitingroom", pg.Environment)
	}

	// The trace viewer: pinned, its UI and OTLP receivers on loopback only.
	jaeger := p.Services["jaeger"]
	if !strings.HasPrefix(jaeger.Image, "jaegertracing/jaeger:2.") {
		t.Errorf("jaeger: image %q, want a pinned jaegertracing/jaeger 2.x", jaeger.Image)
	}
	jaegerPorts := map[uint32]bool{}
	for _, port := range jaeger.Ports {
		if port.HostIP != "127.0.0.1" || port.Published != strconv.Itoa(int(port.Target)) {
			t.Errorf("jaeger: port %+v, want it published as itself on 127.0.0.1 only", port)
		}
		jaegerPorts[port.Target] = true
	}
	if !jaegerPorts[16686] || !jaegerPorts[4318] || !jaegerPorts[4317] {
		t.Errorf("jaeger: ports %v, want the UI 16686 and OTLP 4317, 4318", jaegerPorts)
	}

	published := map[int]string{}
	for _, name := range p.ServiceNames() {
		for _, port := range p.Services[name].Ports {
			n, _ := strconv.Atoi(port.Published)
			published[n] = name
		}
	}

	for _, svc := range services {
		s := p.Services[svc.name]
		t.Run(svc.name, func(t *testing.T) {
			// Built from the one Dockerfile, the service named by SERVICE.
			b := s.Build
			if b == nil {
				t.Fatal("no build section")
			}
			if filepath.Clean(b.Context) != root {
				t.Errorf("build context %q, want the repository root", b.Context)
			}
			df := b.Dockerfile
			if !filepath.IsAbs(df) {
				df = filepath.Join(b.Context, df)
			}
			if df != filepath.Join(root, "deploy", "Dockerfile") {
				t.Errorf("dockerfile %q, want deploy/Dockerfile", b.Dockerfile)
			}
			if arg := b.Args["SERVICE"]; arg == nil || *arg != svc.name {
				got := "unset"
				if arg != nil {
					got = *arg
				}
				t.Errorf("build arg SERVICE = %s, want %s", got, svc.name)
			}

			// Its API port published as itself; its ops port as itself on
			// this machine's loopback only (/metrics names every queue).
			want := map[uint32]string{uint32(svc.opsPort): "127.0.0.1"}
			if svc.port != 0 {
				want[uint32(svc.port)] = ""
			}
			if len(s.Ports) != len(want) {
				t.Errorf("ports %+v, want %d:%d and 127.0.0.1:%d:%d", s.Ports, svc.port, svc.port, svc.opsPort, svc.opsPort)
			}
			for _, port := range s.Ports {
				ip, ok := want[port.Target]
				if !ok || port.Published != strconv.Itoa(int(port.Target)) || port.HostIP != ip {
					t.Errorf("port %+v: want the API port %d on every address or the ops port %d on 127.0.0.1, each published as itself", port, svc.port, svc.opsPort)
				}
				if published[int(port.Target)] != svc.name {
					t.Errorf("port %d is published by %q", port.Target, published[int(port.Target)])
				}
			}
			for k, port := range map[string]int{"HTTP_ADDR": svc.port, "OPS_ADDR": svc.opsPort} {
				if v := envOf(s, k); v != "" && v != ":"+strconv.Itoa(port) {
					t.Errorf("%s %q does not listen on %d", k, v, port)
				}
			}

			// The servers by their compose names.
			wantEnv := map[string]string{
				"REDIS_URL": "redis://redis:6379/0",
				"AMQP_URL":  "amqp://guest:guest@rabbitmq:5672/",
				// Traces to the viewer, which nobody waits for.
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			}
			deps := []string{"redis"}
			if svc.amqp {
				deps = append(deps, "rabbitmq")
			}
			if svc.database {
				wantEnv["DATABASE_URL"] = "postgres://postgres@postgres:5432/waitingroom?sslmode=disable"
				deps = append(deps, "postgres")
			}
			if svc.auth {
				wantEnv["AUTH_DEV_MODE"] = "true"
			}
			switch svc.name {
			case "queue-gateway":
				wantEnv["ORDER_SERVICE_PUBLIC_URL"] = "http://localhost:8081"
				wantEnv["NOTIFICATION_SERVICE_PUBLIC_URL"] = "http://localhost:8082"
			case "order-service", "notification-service":
				wantEnv["CORS_ALLOWED_ORIGINS"] = "http://localhost:8080"
			}
			for k, v := range wantEnv {
				if got := envOf(s, k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			for k := range s.Environment {
				if !envNameKnown(t, k) {
					t.Errorf("environment %s is not a variable any service reads", k)
				}
			}
			for _, k := range []string{"REDIS_URL", "AMQP_URL", "DATABASE_URL", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
				if v := envOf(s, k); v != "" {
					u, err := url.Parse(v)
					if err != nil || p.Services[u.Hostname()].Name == "" {
						t.Errorf("%s = %q does not name a compose service", k, v)
					}
				}
			}
			if !svc.auth && envOf(s, "AUTH_DEV_MODE") != "" {
				t.Errorf("AUTH_DEV_MODE set on a service without auth")
			}

			// Started once its servers are healthy.
			var gotDeps []string
			for name, d := range s.DependsOn {
				gotDeps = append(gotDeps, name)
				if d.Condition != types.ServiceConditionHealthy {
					t.Errorf("depends_on %s: condition %q, want %s", name, d.Condition, types.ServiceConditionHealthy)
				}
				if _, ok := infra[name]; !ok {
					t.Errorf("depends_on %s: only the infrastructure has a healthcheck to wait for", name)
				}
			}
			slices.Sort(gotDeps)
			slices.Sort(deps)
			if !slices.Equal(gotDeps, deps) {
				t.Errorf("depends_on %v, want %v", gotDeps, deps)
			}

			if s.Restart != types.RestartPolicyUnlessStopped {
				t.Errorf("restart %q, want unless-stopped", s.Restart)
			}
			// Distroless: no shell, so no healthcheck command can run in it.
			if s.HealthCheck != nil && !s.HealthCheck.Disable {
				t.Errorf("healthcheck %v cannot run in a distroless image", s.HealthCheck.Test)
			}
			if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= svc.shutdown {
				t.Errorf("stop_grace_period %v not above SHUTDOWN_TIMEOUT %s", s.StopGracePeriod, svc.shutdown)
			}
			if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
				t.Errorf("want read_only and cap_drop ALL, as in Kubernetes")
			}
		})
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
