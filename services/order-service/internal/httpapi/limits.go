package httpapi

import (
	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// Limits are the routes' in-process limits (pkg/throttle), each answered
// 429 with Retry-After from memory, before the handler reaches Redis or
// Postgres; a nil one is off.
type Limits struct {
	// Orders: POST /api/v1/orders per user (a rate and an in-flight cap),
	// in front of the entry token's check.
	Orders *throttle.Limiter
	// Lookups: GET /api/v1/orders/{id} per user; LookupsInFlight: the
	// replica's lookups in flight, all users together.
	Lookups, LookupsInFlight *throttle.Limiter
	// Public: GET /api/v1/products per client address.
	Public *throttle.Limiter
	// IPv6Prefix is the prefix length an IPv6 client is counted by
	// (clientkey.Of); 0 means clientkey.DefaultIPv6Prefix.
	IPv6Prefix int
}

// The limits' names in waitingroom_http_throttled_total.
const (
	limitOrders          = "orders_per_user"
	limitLookups         = "lookups_per_user"
	limitLookupsInFlight = "lookups_in_flight"
	limitPublic          = "public_per_address"
)

// allLookups is the one key of the replica-wide lookup cap.
const allLookups = "all"

// throttles are the routes' limit middlewares.
type throttles struct {
	orders, lookups, lookupsInFlight, public gin.HandlerFunc
}

func newThrottles(l Limits, refused *httpserver.Throttled) throttles {
	byUser := func(c *gin.Context) string {
		p, _ := auth.FromContext(c)
		return p.UserID
	}
	byAddress := func(c *gin.Context) string { return clientkey.Of(c.ClientIP(), l.IPv6Prefix) }
	return throttles{
		orders: httpserver.Throttle(l.Orders, byUser,
			"too many order requests from this user at once; nothing was checked or used", refused.By(limitOrders)),
		lookups: httpserver.Throttle(l.Lookups, byUser,
			"too many order lookups from this user", refused.By(limitLookups)),
		lookupsInFlight: httpserver.Throttle(l.LookupsInFlight, func(*gin.Context) string { return allLookups },
			"too many order lookups right now", refused.By(limitLookupsInFlight)),
		public: httpserver.Throttle(l.Public, byAddress,
			"too many requests from this address", refused.By(limitPublic)),
	}
}
