package httpapi_test

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// The OpenAPI document and the router describe the same API: every route is
// documented and every documented operation is routed.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	ver, _ := auth.NewVerifier("openapi-test-secret-0123456789abcdef")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := order.New(nopTokens{}, nopRepo{}, nil, order.Limits{}, log, order.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Options{Service: svc, Audit: audit.New(nil), History: history.New(nil), Verifier: ver, Log: log,
		Registry: prometheus.NewRegistry(), Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	routes := httpserver.RoutesOf(h.(*gin.Engine))
	ops, err := httpserver.OperationsOf(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(routes, ops) {
		t.Fatalf("routes and OpenAPI operations differ:\nroutes:  %v\nopenapi: %v", routes, ops)
	}
	if len(routes) != 9 {
		t.Fatalf("%d routes, want 9", len(routes))
	}
}
