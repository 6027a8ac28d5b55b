package httpapi

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	ver, _ := auth.NewVerifier("openapi-test-secret-0123456789abcdef")
	h, err := New(Options{Service: stream.New(hub.New(1, 0), nil, log, nil, stream.Options{}), Verifier: ver, Log: log, Registry: reg,
		Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := httpserver.OperationsOf(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if routes := httpserver.RoutesOf(h.Handler.(*gin.Engine)); !slices.Equal(routes, ops) || len(routes) != 7 {
		t.Fatalf("routes and OpenAPI operations differ:\nroutes:  %v\nopenapi: %v", routes, ops)
	}
}
