package httpserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

// opsRig is an API engine and an ops listener over one registry and one
// Health whose redis check fails while down is set.
type opsRig struct {
	api, ops string
	health   *httpserver.Health
}

func newOpsRig(t *testing.T, pprof bool, timeouts config.HTTP, down *bool) opsRig {
	t.Helper()
	reg := prometheus.NewRegistry()
	sales := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "waitingroom_test_enters_total", Help: "test"}, []string{"queue"})
	reg.MustRegister(sales)
	sales.WithLabelValues("secret-sale").Add(3)
	health := httpserver.NewHealth(map[string]httpserver.Check{"redis": func(context.Context) error {
		if *down {
			return errors.New("dial tcp 10.0.0.7:6379: connection refused")
		}
		return nil
	}})
	e, err := httpserver.NewEngine(httpserver.EngineOptions{Service: "test", Log: discard, Registry: reg, Health: health})
	if err != nil {
		t.Fatal(err)
	}
	timeouts.ShutdownTimeout = time.Second
	ops, err := httpserver.NewOps("127.0.0.1:0", httpserver.OpsOptions{Registry: reg, Health: health, Pprof: pprof, Log: discard,
		Timeouts: timeouts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ops Serve: %v", err)
		}
	})
	return opsRig{api: "http://" + serve(t, e, timeouts), ops: "http://" + ops.Addr(), health: health}
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 20 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return res.StatusCode, string(b)
}

var defaultTimeouts = config.HTTP{ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}

func TestMetricsAreOnTheOpsListenerOnly(t *testing.T) {
	t.Parallel()
	down := false
	r := newOpsRig(t, false, defaultTimeouts, &down)

	code, body := fetch(t, r.api+"/metrics")
	if code != http.StatusNotFound || strings.Contains(body, "secret-sale") {
		t.Fatalf("API /metrics: %d %.200q, want 404 naming no queue", code, body)
	}
	code, body = fetch(t, r.ops+"/metrics")
	for _, want := range []string{`waitingroom_test_enters_total{queue="secret-sale"} 3`, "\ngo_goroutines ", "\nprocess_cpu_seconds_total "} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("ops /metrics: %d, want 200 with %q", code, want)
		}
	}
}

func TestHealthOnBothListenersReasonsOnlyOnOps(t *testing.T) {
	t.Parallel()
	down := false
	r := newOpsRig(t, false, defaultTimeouts, &down)
	for _, base := range []string{r.api, r.ops} {
		if code, body := fetch(t, base+"/healthz"); code != http.StatusOK || body != `{"status":"ok"}` {
			t.Errorf("%s/healthz: %d %q", base, code, body)
		}
		if code, body := fetch(t, base+"/readyz"); code != http.StatusOK || body != `{"status":"ready"}` {
			t.Errorf("%s/readyz: %d %q", base, code, body)
		}
	}

	down = true
	time.Sleep(1100 * time.Millisecond) // past the one-second cache
	if code, body := fetch(t, r.ops+"/readyz"); code != http.StatusServiceUnavailable ||
		body != `{"failed":{"redis":"dial tcp 10.0.0.7:6379: connection refused"},"status":"unavailable"}` {
		t.Errorf("ops /readyz with redis down: %d %q", code, body)
	}
	if code, body := fetch(t, r.api+"/readyz"); code != http.StatusServiceUnavailable || body != `{"status":"unavailable"}` {
		t.Errorf("API /readyz with redis down: %d %q, want 503 without the reason", code, body)
	}

	r.health.Drain()
	for _, base := range []string{r.api, r.ops} {
		if code, body := fetch(t, base+"/readyz"); code != http.StatusServiceUnavailable || body != `{"status":"draining"}` {
			t.Errorf("%s/readyz draining: %d %q", base, code, body)
		}
		if code, _ := fetch(t, base+"/healthz"); code != http.StatusOK {
			t.Errorf("%s/healthz draining: %d", base, code)
		}
	}
}

func TestPprofOnlyWhenEnabled(t *testing.T) {
	t.Parallel()
	down := false
	off := newOpsRig(t, false, defaultTimeouts, &down)
	for _, url := range []string{off.ops + "/debug/pprof/", off.ops + "/debug/pprof/goroutine?debug=1", off.api + "/debug/pprof/"} {
		if code, _ := fetch(t, url); code != http.StatusNotFound {
			t.Errorf("pprof off: %s: %d, want 404", url, code)
		}
	}

	// A profile longer than HTTP_WRITE_TIMEOUT still streams: the ops
	// listener drops the write timeout when pprof is on.
	short := config.HTTP{ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second}
	on := newOpsRig(t, true, short, &down)
	if code, body := fetch(t, on.ops+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile: total") {
		t.Errorf("pprof on: goroutine profile %d %.100q", code, body)
	}
	if code, body := fetch(t, on.ops+"/debug/pprof/profile?seconds=3"); code != http.StatusOK || len(body) == 0 {
		t.Errorf("pprof on: a 3 s CPU profile under a 1 s write timeout: %d, %d bytes", code, len(body))
	}
	if code, _ := fetch(t, on.api+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("pprof on: the API port's /debug/pprof/: %d, want 404", code)
	}
}

func TestOpsListenerNeedsItsParts(t *testing.T) {
	t.Parallel()
	if _, err := httpserver.NewOps("127.0.0.1:0", httpserver.OpsOptions{Log: discard}); err == nil {
		t.Fatal("NewOps without a registry and health: no error")
	}
}
