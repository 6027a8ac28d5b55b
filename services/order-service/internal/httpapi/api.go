// Package httpapi is the order-service's HTTP port.
package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Repo is what the handlers read and write directly. pg.DB implements it.
type Repo interface {
	Order(ctx context.Context, id string) (order.Order, error)
	Product(ctx context.Context, id string) (order.Product, error)
	Products(ctx context.Context, queueID string) ([]order.Product, error)
	// QueueIDs lists the queues with products (the public catalog's index).
	QueueIDs(ctx context.Context) ([]string, error)
	UpsertProduct(ctx context.Context, p order.Product) (order.Product, bool, error)
	BeginIdempotent(ctx context.Context, userID, key string) (order.IdempotentResult, bool, error)
	// LookupIdempotent reads (userID, key)'s record without claiming it.
	LookupIdempotent(ctx context.Context, userID, key string) (order.IdempotentResult, bool, error)
	FinishIdempotent(ctx context.Context, userID, key string, status int, body []byte) error
	AbandonIdempotent(ctx context.Context, userID, key string) error
}

// Options are the handler's dependencies.
type Options struct {
	Service  *order.Service
	Repo     Repo
	Verifier *auth.Verifier
	Log      *slog.Logger
	Registry *prometheus.Registry
	Health   *httpserver.Health
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed.
	TrustedProxies []string
	// CORSOrigins may call the API from a browser.
	CORSOrigins []string
}

type handler struct {
	svc     *order.Service
	repo    Repo
	catalog *catalog
	log     *slog.Logger
	m       *metrics
}

// New returns the order-service's routes.
func New(o Options) (http.Handler, error) {
	if o.Service == nil || o.Repo == nil || o.Verifier == nil || o.Log == nil || o.Registry == nil || o.Health == nil {
		return nil, errors.New("httpapi: service, repo, verifier, log, registry and health are required")
	}
	e, err := httpserver.NewEngine(httpserver.EngineOptions{
		Service: "order-service", Log: o.Log, Registry: o.Registry, Health: o.Health, TrustedProxies: o.TrustedProxies, CORSOrigins: o.CORSOrigins,
	})
	if err != nil {
		return nil, err
	}
	h := &handler{svc: o.Service, repo: o.Repo, catalog: newCatalog(o.Repo), log: o.Log, m: newMetrics(o.Registry)}
	user := o.Verifier.Middleware(false)
	api := e.Group("/api/v1")
	api.POST("/orders", user, h.placeOrder)
	api.GET("/orders/:orderId", user, h.getOrder)
	api.GET("/products", h.listProducts)
	admin := e.Group("/admin/v1", user, auth.RequireAdmin())
	admin.PUT("/products/:productId", h.putProduct)
	httpserver.ServeOpenAPI(e, OpenAPI)
	return e, nil
}

// OpenAPI is the service's OpenAPI 3.1 document, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
