package httpapi_test

import (
	"slices"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// The OpenAPI document and the router describe the same API: every route is
// documented and every documented operation is routed (dev mode and the page
// on, so every optional route exists).
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPage(pageConfig, true))
	routes := httpserver.RoutesOf(h.h.(*gin.Engine))
	ops, err := httpserver.OperationsOf(httpapi.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(routes, ops) {
		t.Fatalf("routes and OpenAPI operations differ:\nroutes:  %v\nopenapi: %v", routes, ops)
	}
	if len(routes) != 21 {
		t.Fatalf("%d routes, want 21", len(routes))
	}
	if r := h.must("GET", "/openapi.yaml", "", nil); r.status != 200 || string(r.body) != string(httpapi.OpenAPI) {
		t.Fatalf("GET /openapi.yaml: %d", r.status)
	}
}
