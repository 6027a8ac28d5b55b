// Package httpapi is the notification-service's HTTP port: its routes, the
// Server-Sent Events handler and the OpenAPI document.
//
// Besides net/http's own, the handler runs the goroutines that serve the
// streams whose connections it took over (stream.go), and each has an
// owner that Handler.Close stops and waits for:
//   - the openers and the writers (pool.work) belong to their pool
//     (writers.go), whose close ends them;
//   - the epoll goroutine (watcher.poll, watch_linux.go) and the readers
//     of connections epoll cannot watch (readUntilGone) belong to the
//     watcher (watch.go), whose close ends every stream it still watches;
//   - a write finishing what a socket did not take at once (conn.finish)
//     and a heartbeat timer's callback (conn.heartbeat) are counted in the
//     streams' tasks (stream.go); they end with their connection, which the
//     watcher's close closes.
//
// The service closes the Handler once its API server has stopped
// (wire.New).
package httpapi

import (
	_ "embed"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/throttle"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/push"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// OpenAPI is the service's OpenAPI 3.1 document, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Options are the handler's dependencies.
type Options struct {
	// Service runs the streams: the handler reaches the hub and the
	// position store only through it.
	Service  *stream.Service
	Verifier *auth.Verifier
	Log      *slog.Logger
	Registry *prometheus.Registry
	Health   *httpserver.Health
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed (the
	// per-address stream cap counts the client behind them).
	TrustedProxies []string
	// CORSOrigins may open a stream from a browser.
	CORSOrigins []string
	// Push keeps the Web Push subscriptions; nil is push turned off (its
	// routes answer 404).
	Push *push.Service
}

// Handler is the notification-service's routes. It owns the goroutines
// that serve the event streams whose connections it took over; Close stops
// them.
type Handler struct {
	http.Handler
	streams *streams
}

// Close ends every stream whose connection the handler took over and
// returns once every goroutine serving them has returned. A stream asked
// for afterwards is refused with 503. Call it once the server stopped
// passing requests on (service.Group closes its resources after its
// components returned). It always returns nil.
func (h *Handler) Close() error {
	h.streams.close()
	return nil
}

// New returns the notification-service's routes.
func New(o Options) (*Handler, error) {
	if o.Service == nil || o.Verifier == nil || o.Log == nil || o.Registry == nil || o.Health == nil {
		return nil, errors.New("httpapi: service, verifier, log, registry and health are required")
	}
	e, err := httpserver.NewEngine(httpserver.EngineOptions{
		Service: "notification-service", Log: o.Log, Registry: o.Registry, Health: o.Health,
		TrustedProxies: o.TrustedProxies, CORSOrigins: o.CORSOrigins,
	})
	if err != nil {
		return nil, err
	}
	h := newStreams(o.Service)
	e.GET("/api/v1/queues/:queueId/events", o.Verifier.Middleware(true), h.handle)
	limit, err := throttle.New(pushLimit)
	if err != nil {
		return nil, err
	}
	throttled, err := httpserver.NewThrottled(o.Registry)
	if err != nil {
		return nil, err
	}
	paced := httpserver.Throttle(limit, userOf, "subscribing too often: try again later", throttled.By("push"))
	p := pushRoutes{svc: o.Push}
	e.GET("/api/v1/push/key", p.key)
	e.PUT("/api/v1/queues/:queueId/push", o.Verifier.Middleware(false), paced, p.subscribe)
	e.DELETE("/api/v1/queues/:queueId/push/:id", o.Verifier.Middleware(false), paced, p.unsubscribe)
	httpserver.ServeOpenAPI(e, OpenAPI)
	return &Handler{Handler: e, streams: h}, nil
}
