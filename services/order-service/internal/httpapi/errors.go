package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// unavailable answers every outage of the order path, whichever store it
// was.
var unavailable = problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
	"the order path is unavailable; if your entry token was used it is given back").WithRetryAfter(2 * time.Second)

// overloaded answers a request this replica could not even start: every
// Redis connection busy (queue.ErrOverloaded), nothing sent, no token used.
var overloaded = problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
	"the order service is overloaded; your entry token was not used").WithRetryAfter(time.Second)

// problems is the order path's table from the order service's errors to
// problem responses, first match first; httpserver.Problems adds the
// answers every service shares (499 for a client gone, 500 for an error
// not listed).
var problems = httpserver.NewProblems(
	httpserver.As(func(e *order.InvalidProductError) *problem.Problem {
		fe := make([]problem.FieldError, len(e.Fields))
		for i, f := range e.Fields {
			fe[i] = problem.FieldError{Field: f.Field, Message: f.Message}
		}
		return problem.New(http.StatusBadRequest, problem.TypeValidation, "invalid product").WithErrors(fe)
	}),
	httpserver.As(func(e *order.RateLimitedError) *problem.Problem {
		detail := "too many orders for this queue right now; your entry token was not used"
		if e.PerUser {
			detail = "too many order requests without a usable entry token from this user"
		}
		return problem.New(http.StatusTooManyRequests, problem.TypeRateLimited, detail).WithRetryAfter(e.RetryAfter)
	}),
	httpserver.Is(queue.ErrInvalidToken, problem.New(http.StatusForbidden, problem.TypeInvalidEntryToken,
		"the entry token is missing, wrong, expired, used, or not yours for this queue")),
	httpserver.As(func(e *queue.NotActiveError) *problem.Problem {
		return problem.New(http.StatusTooEarly, problem.TypeTokenNotActive, "your entry token activates shortly").WithRetryAfter(e.Wait)
	}),
	httpserver.Is(order.ErrInvalidRequest, problem.New(http.StatusBadRequest, problem.TypeValidation, "the order request is invalid")),
	httpserver.Is(order.ErrSoldOut, problem.New(http.StatusConflict, problem.TypeSoldOut, "not enough stock left for this order")),
	httpserver.Is(order.ErrOrderLimitReached, problem.New(http.StatusConflict, problem.TypeOrderLimitReached,
		"you have as many orders in this sale as one person may place; your entry token is used up")),
	httpserver.Is(order.ErrProductNotFound, problem.New(http.StatusBadRequest, problem.TypeProductNotFound,
		"no such product in this queue; your entry token is given back")),
	httpserver.Is(order.ErrOrderNotFound, problem.New(http.StatusNotFound, problem.TypeOrderNotFound, "no such order")),
	httpserver.Is(order.ErrDuplicateToken, problem.New(http.StatusConflict, problem.TypeTokenAlreadyUsed,
		"an order was already placed with this entry token")),
	httpserver.Is(order.ErrIdempotencyInProgress, problem.New(http.StatusConflict, problem.TypeIdempotencyInProgress,
		"a request with this Idempotency-Key is still running").WithRetryAfter(time.Second)),
	httpserver.Is(queue.ErrOverloaded, overloaded).Unavailable("overloaded"),
	httpserver.Is(order.ErrAttemptFailed, unavailable).Unavailable("order attempt recorded failed before it committed"),
	httpserver.Is(order.ErrUnavailable, unavailable).Unavailable("dependency unavailable"),
	httpserver.Is(queue.ErrUnavailable, unavailable).Unavailable("dependency unavailable"),
	httpserver.Is(context.DeadlineExceeded, unavailable).Unavailable("dependency unavailable"),
)

// problemFor is the problem for err, for render, which stores the answer
// under an Idempotency-Key before it is sent.
func (h *handler) problemFor(c *gin.Context, err error) *problem.Problem {
	return problems.Problem(c, h.log, err)
}

// fail answers an order service's error through the order path's problems.
func (h *handler) fail(c *gin.Context, err error) { problems.Fail(c, h.log, err) }
