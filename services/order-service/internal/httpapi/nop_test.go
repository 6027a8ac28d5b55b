package httpapi_test

import (
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Stand-ins that are never called: the route test only builds the router.
type (
	nopTokens struct{ order.Tokens }
	nopRepo   struct{ order.Repo }
)
