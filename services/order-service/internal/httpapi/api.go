// Package httpapi is the order-service's HTTP port.
package httpapi

import (
	_ "embed"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Options are the handler's dependencies.
type Options struct {
	// Service runs every use case: the handlers reach the database only
	// through it.
	Service *order.Service
	// Audit lists the operators' changes of the queues.
	Audit *audit.Service
	// History makes the queues' sale reports.
	History  *history.Service
	Verifier *auth.Verifier
	Log      *slog.Logger
	Registry *prometheus.Registry
	Health   *httpserver.Health
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed.
	TrustedProxies []string
	// CORSOrigins may call the API from a browser.
	CORSOrigins []string
	// Limits are the in-process limits in front of the routes.
	Limits Limits
}

type handler struct {
	svc *order.Service
	log *slog.Logger
}

// New returns the order-service's routes.
func New(o Options) (http.Handler, error) {
	if o.Service == nil || o.Audit == nil || o.History == nil || o.Verifier == nil || o.Log == nil || o.Registry == nil || o.Health == nil {
		return nil, errors.New("httpapi: service, audit, history, verifier, log, registry and health are required")
	}
	e, err := httpserver.NewEngine(httpserver.EngineOptions{
		Service: "order-service", Log: o.Log, Registry: o.Registry, Health: o.Health, TrustedProxies: o.TrustedProxies, CORSOrigins: o.CORSOrigins,
	})
	if err != nil {
		return nil, err
	}
	refused, err := httpserver.NewThrottled(o.Registry)
	if err != nil {
		return nil, err
	}
	lim := newThrottles(o.Limits, refused)
	h := &handler{svc: o.Service, log: o.Log}
	user := o.Verifier.Middleware(false)
	api := e.Group("/api/v1")
	api.POST("/orders", user, lim.orders, h.placeOrder)
	api.GET("/orders/:orderId", user, lim.lookups, lim.lookupsInFlight, h.getOrder)
	api.GET("/products", lim.public, h.listProducts)
	admin := e.Group("/admin/v1", user, auth.RequireAdmin())
	admin.PUT("/products/:productId", h.putProduct)
	admin.GET("/audit", auditRoutes{trail: o.Audit, log: o.Log}.list)
	admin.GET("/queues/:queueId/report", reportRoutes{history: o.History, log: o.Log}.report)
	httpserver.ServeOpenAPI(e, OpenAPI)
	return e, nil
}

// OpenAPI is the service's OpenAPI 3.1 document, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
