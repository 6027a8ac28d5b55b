// Package httpapi is the notification-service's HTTP port: its routes, the
// Server-Sent Events handler and the OpenAPI document.
package httpapi

import (
	_ "embed"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// OpenAPI is the service's OpenAPI 3.1 document, served at /openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Register adds the service's routes to e.
func Register(e *gin.Engine, ver *auth.Verifier, svc *stream.Service) {
	h := &streams{svc: svc, o: svc.Options()}
	e.GET("/api/v1/queues/:queueId/events", ver.Middleware(true), h.handle)
	httpserver.ServeOpenAPI(e, OpenAPI)
}
