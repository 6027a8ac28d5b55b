package httpserver

import (
	"time"

	"github.com/gin-contrib/cors"
	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// CheckOrigins trims CORS_ALLOWED_ORIGINS entries ("a, b" is a common way
// to write a list) and refuses one that is not scheme://host[:port].
func CheckOrigins(origins []string) ([]string, error) {
	return config.CORS{CORSAllowedOrigins: origins}.Origins()
}

// CORS lets the waiting-room page, served by the gateway from another
// origin, call this service. Only the listed origins are allowed; with none,
// nothing is added and browsers keep the same-origin rule.
func CORS(origins []string) gin.HandlerFunc {
	if len(origins) == 0 {
		return func(*gin.Context) {}
	}
	return cors.New(cors.Config{
		AllowOrigins:     origins,
		AllowMethods:     []string{"GET", "POST", "PUT", "DELETE", "OPTIONS"},
		AllowHeaders:     []string{"Authorization", "Content-Type", "X-Entry-Token", "Idempotency-Key", "Last-Event-ID", "X-Enter-Challenge", "X-Queue-Ticket"},
		ExposeHeaders:    []string{"Retry-After", "Location", "Idempotent-Replayed"},
		AllowCredentials: false,
		MaxAge:           10 * time.Minute,
	})
}
