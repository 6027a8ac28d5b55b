//go:build images

package images

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// localImages maps docker-compose.yml's public infrastructure images to the
// stand-ins infra-images.sh builds from Debian's packages.
var localImages = map[string]string{
	"redis:7-alpine":           "localhost/waitingroom/redis:compose-test",
	"rabbitmq:3.13-management": "localhost/waitingroom/rabbitmq:compose-test",
	"postgres:15-alpine":       "localhost/waitingroom/postgres:compose-test",
}

// traceViewer is the compose service that receives OTLP. It has no Debian
// package, so the test stands in for it: its host name leads to a receiver
// in the test, which also shows that the containers' traces arrive.
const traceViewer = "jaeger"

// loadCompose loads docker-compose.yml as `docker compose` does, with an
// empty environment so nothing on this machine leaks in.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yml")}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("waitingroom", true) })
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

// netns is a network namespace with a veth pair to this machine: the
// compose stack's containers all join it, so they reach one another on its
// loopback (every service name resolves to 127.0.0.1, as one pod), and the
// test reaches their ports at Addr, where `docker compose` would publish
// them. The machine's own servers on 6379, 5672 and 5432 stay apart.
type netns struct {
	Name, Path string
	Host, Addr string // this machine's end, the namespace's end
}

func newNetns(t *testing.T) netns {
	t.Helper()
	sfx := suffix(t)
	n := netns{Name: "wrc-" + sfx, Path: "/run/netns/wrc-" + sfx}
	third, _ := strconv.ParseUint(sfx[:2], 16, 8)
	n.Host, n.Addr = fmt.Sprintf("10.213.%d.1", third), fmt.Sprintf("10.213.%d.2", third)
	host, peer := "wrh"+sfx, "wrn"+sfx
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s (the compose test needs root and iproute2)", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", n.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.Name).Run() })
	ip("-n", n.Name, "link", "set", "lo", "up")
	ip("link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	ip("link", "set", peer, "netns", n.Name)
	ip("addr", "add", n.Host+"/30", "dev", host)
	ip("link", "set", host, "up")
	ip("-n", n.Name, "addr", "add", n.Addr+"/30", "dev", peer)
	ip("-n", n.Name, "link", "set", peer, "up")
	return n
}

// startOrder is the project's services with every dependency before its
// dependents.
func startOrder(t *testing.T, p *types.Project) []string {
	t.Helper()
	var out []string
	seen := map[string]int{} // 1 visiting, 2 done
	var visit func(string)
	visit = func(name string) {
		switch seen[name] {
		case 1:
			t.Fatalf("docker-compose.yml: depends_on cycle through %s", name)
		case 2:
			return
		}
		seen[name] = 1
		for _, d := range slices.Sorted(maps.Keys(p.Services[name].DependsOn)) {
			visit(d)
		}
		seen[name] = 2
		out = append(out, name)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		visit(name)
	}
	return out
}

// runArgs translates one compose service to the engine's run flags, the
// image and the command. What the translation does not know fails the
// test, so it cannot silently drop a setting the file gains.
func runArgs(t *testing.T, p *types.Project, s types.ServiceConfig, ns netns, name string) ([]string, string, []string) {
	t.Helper()
	if len(s.Volumes) > 0 || len(s.Tmpfs) > 0 || len(s.Entrypoint) > 0 || s.User != "" || len(s.CapAdd) > 0 || s.Privileged {
		t.Fatalf("%s: volumes, tmpfs, entrypoint, user, cap_add or privileged: the test's translation does not handle them yet", s.Name)
	}
	for n := range s.Networks {
		if n != "default" {
			t.Fatalf("%s: network %s: the test's translation knows only the default network", s.Name, n)
		}
	}
	flags := []string{"--network", "ns:" + ns.Path, "--hostname", s.Name}
	for _, other := range slices.Sorted(maps.Keys(p.Services)) {
		addr := "127.0.0.1"
		if other == traceViewer {
			addr = ns.Host
		}
		flags = append(flags, "--add-host", other+":"+addr)
	}
	env := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		flags = append(flags, "-e", k+"="+env[k])
	}
	if s.ReadOnly {
		flags = append(flags, "--read-only")
	}
	for _, c := range s.CapDrop {
		flags = append(flags, "--cap-drop", c)
	}
	for _, o := range s.SecurityOpt {
		flags = append(flags, "--security-opt", strings.TrimSuffix(o, ":true"))
	}
	if s.StopGracePeriod != nil {
		flags = append(flags, "--stop-timeout", strconv.Itoa(int(time.Duration(*s.StopGracePeriod)/time.Second)))
	}
	if s.Restart != "" {
		flags = append(flags, "--restart", s.Restart)
	}
	if h := s.HealthCheck; h != nil && !h.Disable {
		switch h.Test[0] {
		case "CMD":
			b, _ := json.Marshal(h.Test[1:])
			flags = append(flags, "--health-cmd", string(b))
		case "CMD-SHELL":
			flags = append(flags, "--health-cmd", strings.Join(h.Test[1:], " "))
		default:
			t.Fatalf("%s: healthcheck %v", s.Name, h.Test)
		}
		for _, d := range []struct {
			flag string
			d    *types.Duration
		}{{"--health-interval", h.Interval}, {"--health-timeout", h.Timeout}, {"--health-start-period", h.StartPeriod}} {
			if d.d != nil {
				flags = append(flags, d.flag, time.Duration(*d.d).String())
			}
		}
		if h.Retries != nil {
			flags = append(flags, "--health-retries", strconv.FormatUint(*h.Retries, 10))
		}
	}
	image := s.Image
	if local, ok := localImages[image]; ok {
		image = local
	} else if s.Build != nil {
		image = "localhost/" + image // what `make images` tagged
	} else {
		t.Fatalf("%s: image %s has no local stand-in", s.Name, s.Image)
	}
	return flags, image, s.Command
}

// healthWithin is how long compose waits for a healthcheck to pass before
// it calls the service unhealthy: start period, then retries intervals.
func healthWithin(h *types.HealthCheckConfig) time.Duration {
	d := 30 * time.Second
	if h.Interval != nil {
		d = time.Duration(*h.Interval)
	}
	retries := uint64(3)
	if h.Retries != nil {
		retries = *h.Retries
	}
	within := time.Duration(retries) * d
	if h.StartPeriod != nil {
		within += time.Duration(*h.StartPeriod)
	}
	return within
}

// waitHealthy runs the container's healthcheck until it passes.
func waitHealthy(t *testing.T, c *container, within time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		if _, err := run(t, "healthcheck", "run", c.name); err == nil {
			if st := c.inspect("{{.State.Health.Status}}"); st != "healthy" {
				t.Fatalf("%s: the healthcheck passed but the status is %q", c.name, st)
			}
			return
		}
		if c.inspect("{{.State.Running}}") != "true" {
			t.Fatalf("%s stopped before it was healthy (exit %s)", c.name, c.inspect("{{.State.ExitCode}}"))
		}
		if time.Since(start) > within {
			t.Fatalf("%s not healthy within %s", c.name, within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestComposeStackWithPodman runs docker-compose.yml's stack with podman:
// the run commands are generated from the file (the infrastructure images
// mapped to local stand-ins, the trace viewer to a receiver in the test),
// the healthchecks must turn healthy, and one person goes enter ->
// admitted -> order through the containers.
func TestComposeStackWithPodman(t *testing.T) {
	if engine(t) != "podman" {
		t.Fatalf("the compose test drives podman (network namespaces of its own); ENGINE=%s. Install podman (deploy/images/podman-setup.sh --install) or run `docker compose up --build` by hand", engine(t))
	}
	p := loadCompose(t)
	for _, img := range localImages {
		requireImage(t, img)
	}
	ns := newNetns(t)
	traces := startSpanCounter(t, ns.Host+":4318")
	prefix := "wr-compose-" + suffix(t) + "-"
	containers := map[string]*container{}
	var ready []string
	for _, name := range startOrder(t, p) {
		if name == traceViewer {
			continue
		}
		s := p.Services[name]
		for dep, d := range s.DependsOn {
			if dep == traceViewer {
				continue
			}
			if d.Condition == types.ServiceConditionHealthy && p.Services[dep].HealthCheck == nil {
				t.Fatalf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		flags, image, cmd := runArgs(t, p, s, ns, name)
		requireImage(t, image)
		t.Logf("%s: podman run -d --name %s %s %s %s", name, prefix+name, strings.Join(flags, " "), image, strings.Join(cmd, " "))
		begin := time.Now()
		c := startContainer(t, prefix+name, flags, image, cmd...)
		containers[name] = c
		if h := s.HealthCheck; h != nil && !h.Disable {
			waitHealthy(t, c, healthWithin(h))
			ready = append(ready, fmt.Sprintf("%s healthy after %s", name, time.Since(begin).Round(100*time.Millisecond)))
			continue
		}
		// No healthcheck (the distroless services): ready when the ops
		// listener says so, on the port compose publishes it on.
		ops := publishedOps(t, s)
		if err := waitStatus(c, fmt.Sprintf("http://%s:%d/readyz", ns.Addr, ops), http.StatusOK, time.Minute); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ready = append(ready, fmt.Sprintf("%s ready after %s", name, time.Since(begin).Round(100*time.Millisecond)))
	}
	t.Logf("started in dependency order: %s", strings.Join(ready, "; "))

	gw := fmt.Sprintf("http://%s:%d", ns.Addr, publishedAPI(t, p.Services["queue-gateway"]))
	orders := fmt.Sprintf("http://%s:%d", ns.Addr, publishedAPI(t, p.Services["order-service"]))
	admin := devToken(t, gw, "ops", "admin")
	call(t, http.MethodPut, gw+"/admin/v1/queues/demo", admin, "", map[string]any{"state": "OPEN", "admissionRatePerSec": 5}, http.StatusCreated)
	call(t, http.MethodPut, orders+"/admin/v1/products/tee", admin, "",
		map[string]any{"queueId": "demo", "name": "Limited tee", "stock": 3, "priceCents": 2500}, http.StatusCreated)
	ann := devToken(t, gw, "ann", "")
	if v := call(t, http.MethodPost, gw+"/api/v1/queues/demo/enter", ann, "", nil, http.StatusOK); v["state"] != "WAITING" && v["state"] != "ADMITTED" {
		t.Fatalf("enter: %v, want WAITING or ADMITTED", v)
	}
	var token string
	deadline := time.Now().Add(30 * time.Second)
	for token == "" {
		v := call(t, http.MethodGet, gw+"/api/v1/queues/demo/position", ann, "", nil, http.StatusOK)
		if v["state"] == "ADMITTED" {
			token, _ = v["token"].(string)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not admitted within 30 s: %v", v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	order := call(t, http.MethodPost, orders+"/api/v1/orders", ann, token,
		map[string]any{"queueId": "demo", "productId": "tee", "quantity": 1}, http.StatusCreated)
	if order["status"] != "CREATED" {
		t.Fatalf("order: %v, want status CREATED", order)
	}
	if v := call(t, http.MethodGet, gw+"/api/v1/queues/demo/position", ann, "", nil, http.StatusOK); v["state"] != "ORDERED" {
		t.Fatalf("after the order: %v, want ORDERED", v)
	}
	rows := must(t, "exec", containers["postgres"].name, "psql", "-U", "postgres", "-d", "waitingroom", "-tAc",
		"SELECT count(*) || ' ' || min(user_id) || ' ' || min(product_id) FROM orders")
	if rows != "1 ann tee" {
		t.Fatalf("orders in the compose stack's database: %q, want 1 order by ann for tee", rows)
	}
	t.Logf("ann: entered, admitted, ordered %v; the database holds %q", order["orderId"], rows)

	// Each service exported spans to the trace viewer's address.
	want := []string{"admission-dispatcher", "notification-service", "order-service", "queue-gateway"}
	var got map[string]int
	for end := time.Now().Add(20 * time.Second); ; {
		got = traces.byService()
		if len(got) == len(want) || time.Now().After(end) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
		t.Errorf("spans received from %v, want from %v", got, want)
	}
	t.Logf("spans received at %s:4318 (the trace viewer's address): %v", ns.Host, got)

	// Stop as compose does: dependents first, each with its grace period.
	order2 := startOrder(t, p)
	slices.Reverse(order2)
	var stops []string
	for _, name := range order2 {
		c, ok := containers[name]
		if !ok || p.Services[name].Build == nil {
			continue
		}
		g := grace
		if d := p.Services[name].StopGracePeriod; d != nil {
			g = time.Duration(*d)
		}
		took, code, err := c.stop(g)
		if err != nil || code != 0 || took >= g {
			t.Errorf("%s: stopped with exit code %d after %s (%v), want 0 within %s", name, code, took, err, g)
		}
		stops = append(stops, fmt.Sprintf("%s exit %d after %s", name, code, took.Round(10*time.Millisecond)))
	}
	t.Logf("stopped, dependents first: %s", strings.Join(stops, "; "))
}

// publishedAPI and publishedOps are the container ports compose publishes
// a service's API and ops listener on: the API on every address, ops on
// loopback only.
func publishedAPI(t *testing.T, s types.ServiceConfig) int { return published(t, s, false) }
func publishedOps(t *testing.T, s types.ServiceConfig) int { return published(t, s, true) }

func published(t *testing.T, s types.ServiceConfig, loopback bool) int {
	t.Helper()
	for _, port := range s.Ports {
		if (port.HostIP == "127.0.0.1") == loopback {
			return int(port.Target)
		}
	}
	t.Fatalf("%s publishes no port (loopback only: %v)", s.Name, loopback)
	return 0
}

// devToken mints a token at the gateway (AUTH_DEV_MODE is on in compose).
func devToken(t *testing.T, gw, user, role string) string {
	t.Helper()
	v := call(t, http.MethodPost, gw+"/api/v1/dev/token", "", "", map[string]string{"userId": user, "role": role}, http.StatusOK)
	tok, _ := v["token"].(string)
	if tok == "" {
		t.Fatalf("dev token for %s: %v", user, v)
	}
	return tok
}

// call sends one JSON request and fails the test unless it answers want.
func call(t *testing.T, method, url, bearer, entryToken string, body any, want int) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if entryToken != "" {
		req.Header.Set("X-Entry-Token", entryToken)
	}
	client := http.Client{Timeout: 10 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, res.StatusCode, b, want)
	}
	return v
}

// spanCounter is an OTLP/HTTP trace receiver that counts spans by the
// service.name of their resource.
type spanCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func startSpanCounter(t *testing.T, addr string) *spanCounter {
	t.Helper()
	c := &spanCounter{n: map[string]int{}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var in collector.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &in)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range in.ResourceSpans {
			svc := "?"
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					svc = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.n[svc] += len(ss.Spans)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return c
}

func (c *spanCounter) byService() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}
