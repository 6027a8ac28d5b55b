// Package httpapi is the notification-service's HTTP port: its routes, the
// Server-Sent Events handler and the OpenAPI document.
package httpapi

import (
	_ "embed"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
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
}

// New returns the notification-service's routes.
func New(o Options) (http.Handler, error) {
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
	h := &streams{svc: o.Service, o: o.Service.Options(), openers: newOpeners(), writers: newWriters()}
	e.GET("/api/v1/queues/:queueId/events", o.Verifier.Middleware(true), h.handle)
	httpserver.ServeOpenAPI(e, OpenAPI)
	return e, nil
}
