package httpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Check reports whether one dependency answers.
type Check func(ctx context.Context) error

// Health serves /healthz (the process is alive) and /readyz (every dependency
// answers), on the ops listener and, for load balancers, the API port. Readiness results are cached for a second so a probe storm does
// not become a dependency storm.
type Health struct {
	checks   map[string]Check
	ttl      time.Duration
	draining atomic.Bool

	mu      sync.Mutex
	checked time.Time
	last    map[string]string
}

// NewHealth returns a Health over the named checks.
func NewHealth(checks map[string]Check) *Health {
	return &Health{checks: checks, ttl: time.Second}
}

// Drain makes /readyz fail from now on, so load balancers stop sending new
// work while in-flight requests finish.
func (h *Health) Drain() { h.draining.Store(true) }

// Healthz answers 200 while the process runs.
func (h *Health) Healthz(w http.ResponseWriter, _ *http.Request) {
	writeStatus(w, http.StatusOK, map[string]any{"status": "ok"})
}

// Readyz answers 200 when every check passes, else 503 naming the failed
// checks and why. For the ops listener: the reasons (a dependency's address,
// its error) are for operators.
func (h *Health) Readyz(w http.ResponseWriter, r *http.Request) { h.ready(w, r, true) }

// PublicReadyz is Readyz without the reasons, for the API port, which the
// world may reach: a load balancer in front of it needs only the status.
func (h *Health) PublicReadyz(w http.ResponseWriter, r *http.Request) { h.ready(w, r, false) }

func (h *Health) ready(w http.ResponseWriter, r *http.Request, reasons bool) {
	if h.draining.Load() {
		writeStatus(w, http.StatusServiceUnavailable, map[string]any{"status": "draining"})
		return
	}
	failed := h.run(r.Context())
	if len(failed) == 0 {
		writeStatus(w, http.StatusOK, map[string]any{"status": "ready"})
		return
	}
	w.Header().Set("Retry-After", "1")
	body := map[string]any{"status": "unavailable"}
	if reasons {
		body["failed"] = failed
	}
	writeStatus(w, http.StatusServiceUnavailable, body)
}

func writeStatus(w http.ResponseWriter, code int, body map[string]any) {
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func (h *Health) run(ctx context.Context) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked.IsZero() && time.Since(h.checked) < h.ttl {
		return h.last
	}
	// Not the prober's own context: one prober giving up must not be
	// cached as every dependency failing for everyone.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	failed := map[string]string{}
	for name, check := range h.checks {
		if err := check(ctx); err != nil {
			failed[name] = err.Error()
		}
	}
	h.checked, h.last = time.Now(), failed
	return failed
}

// Collector is waitingroom_dependency_up{service,dependency}: per readiness
// check, 1 while it passes and 0 while it fails, the check's name as the
// dependency (redis, rabbitmq, postgres, ...). A scrape runs the checks
// through the same one-second cache as /readyz, so the value is fresh
// whether or not anything probes the service, and a scrape storm is no
// dependency storm.
func (h *Health) Collector(service string) prometheus.Collector {
	return &dependencyUp{h: h, desc: prometheus.NewDesc("waitingroom_dependency_up",
		"1 while the readiness check of the dependency passes, 0 while it fails (checked at scrape time, cached for a second).",
		[]string{"dependency"}, prometheus.Labels{"service": service})}
}

type dependencyUp struct {
	h    *Health
	desc *prometheus.Desc
}

func (d *dependencyUp) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *dependencyUp) Collect(ch chan<- prometheus.Metric) {
	failed := d.h.run(context.Background())
	for name := range d.h.checks {
		up := 1.0
		if _, bad := failed[name]; bad {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, up, name)
	}
}
