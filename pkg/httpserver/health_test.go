package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeCheck is a Check whose answer the test sets and whose calls it counts.
type fakeCheck struct {
	calls atomic.Int64
	err   atomic.Pointer[error]
}

func (f *fakeCheck) fail(err error) { f.err.Store(&err) }

func (f *fakeCheck) check(context.Context) error {
	f.calls.Add(1)
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

type answer struct {
	status     int
	body       string
	retryAfter string
}

func probe(ctx context.Context, h http.HandlerFunc) answer {
	w := httptest.NewRecorder()
	h(w, httptest.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil))
	return answer{w.Code, w.Body.String(), w.Header().Get("Retry-After")}
}

func TestHealthzAnswersWhileTheProcessRuns(t *testing.T) {
	h := NewHealth(map[string]Check{"redis": func(context.Context) error { return errors.New("down") }})
	for _, drained := range []bool{false, true} {
		if drained {
			h.Drain()
		}
		w := httptest.NewRecorder()
		h.Healthz(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if w.Code != 200 || w.Body.String() != `{"status":"ok"}` {
			t.Errorf("drained %v: %d %s, want 200 {\"status\":\"ok\"}", drained, w.Code, w.Body)
		}
		if ct, cc := w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"); ct != "application/json; charset=utf-8" || cc != "no-store" {
			t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
		}
	}
}

func TestReadyzNamesFailedChecksOnOpsOnly(t *testing.T) {
	refused := errors.New("dial tcp 10.0.0.7:6379: connection refused")
	timeout := fmt.Errorf("ping: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name    string
		results map[string]error // nil: passes
		ops     answer
		public  answer
	}{
		{name: "no checks",
			ops:    answer{200, `{"status":"ready"}`, ""},
			public: answer{200, `{"status":"ready"}`, ""}},
		{name: "all pass", results: map[string]error{"redis": nil, "postgres": nil},
			ops:    answer{200, `{"status":"ready"}`, ""},
			public: answer{200, `{"status":"ready"}`, ""}},
		{name: "one fails", results: map[string]error{"redis": refused, "postgres": nil},
			ops:    answer{503, `{"failed":{"redis":"dial tcp 10.0.0.7:6379: connection refused"},"status":"unavailable"}`, "1"},
			public: answer{503, `{"status":"unavailable"}`, "1"}},
		{name: "two fail", results: map[string]error{"redis": refused, "postgres": timeout, "amqp": nil},
			ops:    answer{503, `{"failed":{"postgres":"ping: context deadline exceeded","redis":"dial tcp 10.0.0.7:6379: connection refused"},"status":"unavailable"}`, "1"},
			public: answer{503, `{"status":"unavailable"}`, "1"}},
		{name: "a reason is escaped", results: map[string]error{"db": errors.New(`"quoted" <b>`)},
			ops:    answer{503, `{"failed":{"db":"\"quoted\" \u003cb\u003e"},"status":"unavailable"}`, "1"},
			public: answer{503, `{"status":"unavailable"}`, "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := map[string]Check{}
			fakes := map[string]*fakeCheck{}
			for name, err := range tc.results {
				f := &fakeCheck{}
				if err != nil {
					f.fail(err)
				}
				fakes[name], checks[name] = f, f.check
			}
			h := NewHealth(checks)
			h.ttl = 0 // every probe runs the checks

			if got := probe(context.Background(), h.Readyz); got != tc.ops {
				t.Errorf("Readyz %+v, want %+v", got, tc.ops)
			}
			if got := probe(context.Background(), h.PublicReadyz); got != tc.public {
				t.Errorf("PublicReadyz %+v, want %+v", got, tc.public)
			}
			for name, f := range fakes {
				if n := f.calls.Load(); n != 2 {
					t.Errorf("check %s ran %d times for 2 probes, want 2", name, n)
				}
			}
		})
	}
}

func TestReadyzCachesTheAnswer(t *testing.T) {
	if h := NewHealth(nil); h.ttl != time.Second {
		t.Errorf("cache lifetime %v, want 1s", h.ttl)
	}
	redis := &fakeCheck{}
	h := NewHealth(map[string]Check{"redis": redis.check})
	h.ttl = time.Hour

	for i := range 3 {
		if got := probe(context.Background(), h.Readyz); got.status != 200 {
			t.Errorf("probe %d: %+v", i, got)
		}
		if got := probe(context.Background(), h.PublicReadyz); got.status != 200 {
			t.Errorf("public probe %d: %+v", i, got)
		}
	}
	if n := redis.calls.Load(); n != 1 {
		t.Errorf("6 probes in the cache lifetime ran the check %d times, want 1", n)
	}

	// A failure is seen only once the cached answer expires.
	redis.fail(errors.New("down"))
	if got := probe(context.Background(), h.Readyz); got.status != 200 {
		t.Errorf("cached: %+v, want 200", got)
	}
	h.ttl = 0
	want := answer{503, `{"failed":{"redis":"down"},"status":"unavailable"}`, "1"}
	if got := probe(context.Background(), h.Readyz); got != want {
		t.Errorf("expired: %+v, want %+v", got, want)
	}
	if n := redis.calls.Load(); n != 2 {
		t.Errorf("check ran %d times, want 2", n)
	}
}

// TestConcurrentProbesRunTheChecksOnce: a probe storm must not become a
// dependency storm.
func TestConcurrentProbesRunTheChecksOnce(t *testing.T) {
	redis := &fakeCheck{}
	h := NewHealth(map[string]Check{"redis": redis.check})
	h.ttl = time.Hour
	const probes = 64
	errs := make(chan error, probes)
	var wg sync.WaitGroup
	for i := range probes {
		wg.Go(func() {
			handler := h.Readyz
			if i%2 == 1 {
				handler = h.PublicReadyz
			}
			if got := probe(context.Background(), handler); got != (answer{200, `{"status":"ready"}`, ""}) {
				errs <- fmt.Errorf("probe %d: %+v", i, got)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := redis.calls.Load(); n != 1 {
		t.Errorf("%d concurrent probes ran the check %d times, want 1", probes, n)
	}
}

func TestDrainFailsReadinessWithoutRunningChecks(t *testing.T) {
	redis := &fakeCheck{}
	h := NewHealth(map[string]Check{"redis": redis.check})
	h.ttl = 0
	if got := probe(context.Background(), h.Readyz); got.status != 200 {
		t.Fatalf("before draining: %+v", got)
	}
	h.Drain()
	h.Drain() // idempotent
	want := answer{503, `{"status":"draining"}`, ""}
	for i := range 3 {
		if got := probe(context.Background(), h.Readyz); got != want {
			t.Errorf("Readyz %d: %+v, want %+v", i, got, want)
		}
		if got := probe(context.Background(), h.PublicReadyz); got != want {
			t.Errorf("PublicReadyz %d: %+v, want %+v", i, got, want)
		}
	}
	if n := redis.calls.Load(); n != 1 {
		t.Errorf("check ran %d times, want 1 (before draining only)", n)
	}
}

type ctxKey struct{}

// TestChecksGetTheRequestContextBounded: a check sees the probe's context
// (cancelled when the prober goes away) with a deadline at most two seconds
// off.
func TestChecksGetTheRequestContextBounded(t *testing.T) {
	var (
		sawValue    any
		sawDeadline time.Duration
		hasDeadline bool
		sawErr      error
	)
	h := NewHealth(map[string]Check{"db": func(ctx context.Context) error {
		sawValue = ctx.Value(ctxKey{})
		var d time.Time
		d, hasDeadline = ctx.Deadline()
		sawDeadline = time.Until(d)
		sawErr = ctx.Err()
		return ctx.Err()
	}})
	h.ttl = 0

	ctx := context.WithValue(context.Background(), ctxKey{}, "probe-1")
	if got := probe(ctx, h.Readyz); got.status != 200 {
		t.Errorf("%+v, want 200", got)
	}
	if sawValue != "probe-1" || !hasDeadline || sawDeadline > 2*time.Second || sawErr != nil {
		t.Errorf("check saw value %v, deadline %v in %v, err %v; want probe-1, a deadline within 2s, no error",
			sawValue, hasDeadline, sawDeadline, sawErr)
	}

	// A prober that gave up does not cancel the checks: its going away is
	// not a dependency failing (TestAProberGivingUpIsNotADependencyFailing).
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	want := answer{200, `{"status":"ready"}`, ""}
	if got := probe(cancelled, h.Readyz); got != want || sawErr != nil {
		t.Errorf("cancelled probe: %+v (check saw %v), want %+v and no error", got, sawErr, want)
	}
}

// TestEngineReadyzIsThePublicOne: the API port's /readyz never names a
// dependency or its address.
func TestEngineReadyzIsThePublicOne(t *testing.T) {
	redis := &fakeCheck{}
	redis.fail(errors.New("dial tcp 10.0.0.7:6379: connection refused"))
	h := NewHealth(map[string]Check{"redis": redis.check})
	e, err := NewEngine(EngineOptions{Service: "test", Log: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(), Health: h})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want answer
	}{
		{"/readyz", answer{503, `{"status":"unavailable"}`, "1"}},
		{"/healthz", answer{200, `{"status":"ok"}`, ""}},
	} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if got := (answer{w.Code, w.Body.String(), w.Header().Get("Retry-After")}); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.path, got, tc.want)
		}
	}
	if n := redis.calls.Load(); n != 1 {
		t.Errorf("check ran %d times, want 1", n)
	}
}
