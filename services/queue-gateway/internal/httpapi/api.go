// Package httpapi is the queue-gateway's HTTP port: routes, JSON views and the
// one place where errors become problem+json responses.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// Limiter limits enters per client IP. redisstore.RateLimiter implements it.
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, time.Duration, error)
}

// Options are the handler's dependencies.
type Options struct {
	Service  *app.Service
	Verifier *auth.Verifier
	Log      *slog.Logger
	Registry *prometheus.Registry
	Health   *httpserver.Health
	// EnterLimiter may be nil: no per-IP limit.
	EnterLimiter Limiter
	// DevMode enables POST /api/v1/dev/token.
	DevMode        bool
	TrustedProxies []string
	// QueueLister feeds the queue length gauge; nil disables it.
	QueueLister QueueLister
}

type handler struct {
	svc     *app.Service
	ver     *auth.Verifier
	log     *slog.Logger
	limiter Limiter
	m       *metrics
}

// New returns the gateway's routes.
func New(o Options) (http.Handler, error) {
	if o.Service == nil || o.Verifier == nil || o.Log == nil || o.Registry == nil || o.Health == nil {
		return nil, errors.New("httpapi: service, verifier, log, registry and health are required")
	}
	e, err := httpserver.NewEngine(httpserver.EngineOptions{
		Service:        "queue-gateway",
		Log:            o.Log,
		Registry:       o.Registry,
		Health:         o.Health,
		TrustedProxies: o.TrustedProxies,
	})
	if err != nil {
		return nil, err
	}
	h := &handler{svc: o.Service, ver: o.Verifier, log: o.Log, limiter: o.EnterLimiter, m: newMetrics(o.Registry, o.QueueLister, o.Log)}

	user := o.Verifier.Middleware(false)
	api := e.Group("/api/v1")
	api.GET("/queues/:queueId", h.publicQueue)
	api.POST("/queues/:queueId/enter", h.limitEnter, user, h.enter)
	api.GET("/queues/:queueId/position", user, h.position)
	api.DELETE("/queues/:queueId/position", user, h.leave)
	if o.DevMode {
		api.POST("/dev/token", h.devToken)
	}

	admin := e.Group("/admin/v1", user, auth.RequireAdmin())
	admin.GET("/queues", h.listQueues)
	admin.PUT("/queues/:queueId", h.putQueue)
	admin.GET("/queues/:queueId", h.getQueue)
	admin.DELETE("/queues/:queueId", h.deleteQueue)
	return e, nil
}
