package httpserver

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// Check reports whether one dependency answers.
type Check func(ctx context.Context) error

// Health serves /healthz (the process is alive) and /readyz (every dependency
// answers). Readiness results are cached for a second so a probe storm does
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
func (h *Health) Healthz(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// Readyz answers 200 when every check passes, else 503 naming the failures.
func (h *Health) Readyz(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	if h.draining.Load() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "draining"})
		return
	}
	failed := h.run(c.Request.Context())
	if len(failed) > 0 {
		c.Header("Retry-After", "1")
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "failed": failed})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

func (h *Health) run(ctx context.Context) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.checked.IsZero() && time.Since(h.checked) < h.ttl {
		return h.last
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
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
