package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// metric reads one sample from the registry's exposition, as the ops
// listener's /metrics serves it (the API port has no /metrics).
func metric(t *testing.T, h *harness, name, labels string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` ([0-9.e+-]+)$`)
	m := re.FindSubmatch(rec.Body.Bytes())
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMetricsCountOutcomesAndLineLength(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"maxQueueSize": 3})
	for i := range 5 {
		h.enter(q, userID(i))
	}
	h.position(q, userID(0))
	h.position(q, "stranger")

	checks := []struct {
		name, labels string
		want         float64
	}{
		{"waitingroom_gateway_enter_total", `{outcome="waiting"}`, 3},
		{"waitingroom_gateway_enter_total", `{outcome="full"}`, 2},
		{"waitingroom_gateway_position_requests_total", `{state="waiting"}`, 1},
		{"waitingroom_gateway_position_requests_total", `{state="not_in_queue"}`, 1},
		{"waitingroom_queue_waiting", `{queue="` + q + `"}`, 3},
		{"waitingroom_http_request_duration_seconds_count", `{code="200",method="POST",route="/api/v1/queues/:queueId/enter",service="queue-gateway"}`, 3},
		{"waitingroom_http_request_duration_seconds_count", `{code="503",method="POST",route="/api/v1/queues/:queueId/enter",service="queue-gateway"}`, 2},
	}
	for _, c := range checks {
		if got := metric(t, h, c.name, c.labels); got != c.want {
			t.Errorf("%s%s = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestEnterIsRateLimitedPerClientIP(t *testing.T) {
	t.Parallel()
	const perSec = 5
	h := newHarness(t, func(o *httpapi.Options, h *harness) {
		lim, err := redisstore.NewRateLimiter(testenv.Redis(h.t), "test:"+testenv.ID(h.t)+":", perSec)
		if err != nil {
			h.t.Fatal(err)
		}
		h.limits.Enter = lim
		o.TrustedProxies = []string{"127.0.0.1/32"}
	})
	q := h.newQueue(nil)
	enterFrom := func(user, ip string) response {
		return h.must(http.MethodPost, "/api/v1/queues/"+q+"/enter", h.token(user, ""), nil, "X-Forwarded-For", ip)
	}

	start := time.Now()
	allowed, limited := 0, 0
	for i := range 20 {
		switch r := enterFrom(userID(i), "203.0.113.7"); r.status {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
			limited++
			r.problem(t, http.StatusTooManyRequests, "rate-limited")
			if s, _ := strconv.Atoi(r.header.Get("Retry-After")); s < 1 {
				t.Fatalf("429 with Retry-After %q", r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("enter %d: %d %s", i, r.status, r.body)
		}
	}
	elapsed := time.Since(start)
	// GCRA: a burst of perSec, then perSec per second of elapsed time.
	maxAllowed := perSec + int(elapsed.Seconds()*perSec) + 1
	if allowed < perSec || allowed > maxAllowed || allowed+limited != 20 {
		t.Fatalf("allowed %d limited %d in %v; want %d..%d allowed", allowed, limited, elapsed, perSec, maxAllowed)
	}
	// Another client address has its own budget.
	if r := enterFrom("other-ip-user", "198.51.100.1"); r.status != http.StatusOK {
		t.Fatalf("enter from another IP: %d", r.status)
	}
	// Only the allowed ones got a place.
	if z := h.zcard(q); z != int64(allowed+1) {
		t.Fatalf("ZCARD = %d, want %d", z, allowed+1)
	}
}

func TestRedisOutageAnswers503AndRecoversWithoutRestart(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	h := newHarness(t, withRedisURL(srv.URL()))
	q := h.newQueue(nil)
	if r, _, err := h.enter(q, "before"); err != nil || r.status != http.StatusOK {
		t.Fatalf("enter before the outage: %d %v", r.status, err)
	}

	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitDown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, rq := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/queues/" + q + "/enter"},
		{http.MethodGet, "/api/v1/queues/" + q + "/position"},
		{http.MethodDelete, "/api/v1/queues/" + q + "/position"},
		{http.MethodGet, "/api/v1/queues/" + q},
	} {
		r := h.must(rq.method, rq.path, h.token("during", ""), nil)
		r.problem(t, http.StatusServiceUnavailable, "backend-unavailable")
		if s, _ := strconv.Atoi(r.header.Get("Retry-After")); s < 1 {
			t.Fatalf("%s %s: Retry-After %q", rq.method, rq.path, r.header.Get("Retry-After"))
		}
	}
	time.Sleep(1100 * time.Millisecond) // past the readiness cache
	if r := h.must(http.MethodGet, "/readyz", "", nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with Redis down: %d, want 503", r.status)
	}
	if r := h.must(http.MethodGet, "/healthz", "", nil); r.status != http.StatusOK {
		t.Fatalf("/healthz with Redis down: %d, want 200 (the process is alive)", r.status)
	}

	// Redis comes back empty (no persistence, as configured locally): the
	// same gateway serves again without a restart once the queue is recreated.
	srv.Start()
	h.newQueueWithID(q, nil)
	r, st, err := h.enter(q, "after")
	if err != nil || r.status != http.StatusOK || st.Position != 1 {
		t.Fatalf("enter after recovery: %d %+v %v", r.status, st, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := h.must(http.MethodGet, "/readyz", "", nil)
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d 5s after Redis came back", r.status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
