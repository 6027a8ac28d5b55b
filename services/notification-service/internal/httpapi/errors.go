package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// fail answers a refused stream request with its problem: the one switch
// from the stream domain's errors to statuses and problem types.
func fail(c *gin.Context, err error) {
	problem.Write(c.Writer, c.Request, problemOf(err))
	c.Abort()
}

func problemOf(err error) *problem.Problem {
	switch {
	case errors.Is(err, stream.ErrInvalidQueue):
		return problem.New(http.StatusBadRequest, problem.TypeInvalidQueueID, "not a valid queue id")
	case errors.Is(err, stream.ErrForeignUser):
		return problem.New(http.StatusForbidden, problem.TypeForbidden, "a stream can only be opened for the token's own user")
	case errors.Is(err, queue.ErrNotFound):
		return problem.New(http.StatusNotFound, problem.TypeQueueNotFound, "no queue with this id")
	case errors.Is(err, hub.ErrShut):
		return problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
			"this replica is stopping; connect again").WithRetryAfter(time.Second)
	case errors.Is(err, hub.ErrUserCap):
		return problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many open streams for this user").WithRetryAfter(10 * time.Second)
	case errors.Is(err, hub.ErrIPCap):
		return problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
			"too many open streams from this address").WithRetryAfter(10 * time.Second)
	default:
		return problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
			"the waiting room's store is not answering").WithRetryAfter(2 * time.Second)
	}
}
