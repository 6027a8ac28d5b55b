// Package api holds the notification-service's routes and their OpenAPI
// document.
package api

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
	e.GET("/api/v1/queues/:queueId/events", ver.Middleware(true), svc.Handle)
	httpserver.ServeOpenAPI(e, OpenAPI)
}
