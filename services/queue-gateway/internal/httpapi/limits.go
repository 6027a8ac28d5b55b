package httpapi

import (
	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// Limits are the gateway's in-process limits (pkg/throttle), each answered
// 429 with Retry-After from memory before the handler reads Redis; a nil
// one is off. Enter and challenge keep their per-address limits in Redis,
// shared by the replicas (app.Limits).
type Limits struct {
	// Public: GET /api/v1/queues/{q} per client address.
	Public *throttle.Limiter
	// Position: GET and DELETE /api/v1/queues/{q}/position per user, for
	// the requests the engine answers (from Redis). A poll the admission
	// frontier answers in front of the engine (fast.go) costs no more
	// than a refusal would and is not counted.
	Position *throttle.Limiter
}

// The limits' names in waitingroom_http_throttled_total.
const (
	limitPublic   = "public_per_address"
	limitPosition = "position_per_user"
)

type throttles struct{ public, position gin.HandlerFunc }

func newThrottles(l Limits, v6bits int, refused *httpserver.Throttled) throttles {
	return throttles{
		public: httpserver.Throttle(l.Public, func(c *gin.Context) string { return clientkey.Of(c.ClientIP(), v6bits) },
			"too many requests from this address", refused.By(limitPublic)),
		position: httpserver.Throttle(l.Position, func(c *gin.Context) string {
			p, _ := auth.FromContext(c)
			return p.UserID
		}, "too many position requests from this user; poll at retryAfterMs", refused.By(limitPosition)),
	}
}
