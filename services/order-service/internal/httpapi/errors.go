package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

const unavailableRetry = 2 * time.Second

// problemFor maps an error to its problem. It is the one place errors become
// status codes.
func (h *handler) problemFor(c *gin.Context, err error) *problem.Problem {
	var na *queue.NotActiveError
	var rl *order.RateLimitedError
	var ip *order.InvalidProductError
	switch {
	case errors.As(err, &ip):
		fe := make([]problem.FieldError, len(ip.Fields))
		for i, f := range ip.Fields {
			fe[i] = problem.FieldError{Field: f.Field, Message: f.Message}
		}
		return problem.New(http.StatusBadRequest, problem.TypeValidation, "invalid product").WithErrors(fe)
	case errors.As(err, &rl) && rl.PerUser:
		return problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many order requests without a usable entry token from this user").WithRetryAfter(rl.RetryAfter)
	case errors.As(err, &rl):
		return problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many orders for this queue right now; your entry token was not used").WithRetryAfter(rl.RetryAfter)
	case errors.Is(err, queue.ErrInvalidToken):
		return problem.New(http.StatusForbidden, problem.TypeInvalidEntryToken,
			"the entry token is missing, wrong, expired, used, or not yours for this queue")
	case errors.As(err, &na):
		return problem.New(http.StatusTooEarly, problem.TypeTokenNotActive, "your entry token activates shortly").WithRetryAfter(na.Wait)
	case errors.Is(err, order.ErrInvalidRequest):
		return problem.New(http.StatusBadRequest, problem.TypeValidation, "the order request is invalid")
	case errors.Is(err, order.ErrSoldOut):
		return problem.New(http.StatusConflict, problem.TypeSoldOut, "not enough stock left for this order")
	case errors.Is(err, order.ErrProductNotFound):
		return problem.New(http.StatusBadRequest, problem.TypeProductNotFound, "no such product in this queue; your entry token is given back")
	case errors.Is(err, order.ErrOrderNotFound):
		return problem.New(http.StatusNotFound, problem.TypeOrderNotFound, "no such order")
	case errors.Is(err, order.ErrDuplicateToken):
		return problem.New(http.StatusConflict, problem.TypeTokenAlreadyUsed, "an order was already placed with this entry token")
	case errors.Is(err, order.ErrIdempotencyInProgress):
		return problem.New(http.StatusConflict, problem.TypeIdempotencyInProgress, "a request with this Idempotency-Key is still running").
			WithRetryAfter(time.Second)
	case errors.Is(err, order.ErrUnavailable), errors.Is(err, queue.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		h.log.Warn("dependency unavailable", "path", c.FullPath(), "err", err)
		return problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
			"the order path is unavailable; if your entry token was used it is given back").WithRetryAfter(unavailableRetry)
	}
	h.log.Error("request failed", "path", c.FullPath(), "err", err)
	return problem.New(http.StatusInternalServerError, problem.TypeInternal, "internal error")
}

func (h *handler) fail(c *gin.Context, err error) {
	if errors.Is(err, context.Canceled) {
		c.Status(499)
		return
	}
	problem.Write(c.Writer, c.Request, h.problemFor(c, err))
	c.Abort()
}
