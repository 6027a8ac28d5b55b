package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// unavailableRetry is the Retry-After sent while a dependency is down.
const unavailableRetry = 2 * time.Second

// fail maps an error from the use cases to a problem response. It is the one
// place errors become status codes, and the one place they are logged.
func (h *handler) fail(c *gin.Context, err error) {
	var p *problem.Problem
	var cfgErr *app.InvalidConfigError
	switch {
	case errors.As(err, &p):
	case errors.Is(err, app.ErrInvalidQueueID):
		p = problem.New(http.StatusBadRequest, problem.TypeInvalidQueueID, "queue ids are 1 to 64 characters: lower-case letters, digits and '-', starting with a letter or digit")
	case errors.Is(err, app.ErrInvalidUserID):
		p = problem.New(http.StatusBadRequest, problem.TypeInvalidUserID, "the token's subject is not a valid user id")
	case errors.As(err, &cfgErr):
		p = problem.New(http.StatusBadRequest, problem.TypeValidation, "the queue configuration has invalid fields").
			WithErrors(fieldErrors(cfgErr.Fields))
	case errors.Is(err, queue.ErrChallengeRequired):
		p = problem.New(http.StatusPreconditionRequired, problem.TypeChallengeRequired,
			"this queue asks new entrants to solve a challenge: POST "+challengePath(c)+", then enter again with the solution in "+challengeHeader)
	case errors.Is(err, queue.ErrChallengeFailed):
		p = problem.New(http.StatusForbidden, problem.TypeChallengeFailed,
			"the challenge solution is wrong, expired, already used, or below the queue's current difficulty: fetch a new challenge")
	case errors.Is(err, app.ErrChallengeNotRequired):
		p = problem.New(http.StatusConflict, problem.TypeChallengeNotRequired, "this queue asks for no challenge: enter directly")
	case errors.Is(err, queue.ErrNotFound):
		p = problem.New(http.StatusNotFound, problem.TypeQueueNotFound, "no queue with this id")
	case errors.Is(err, queue.ErrClosed):
		p = problem.New(http.StatusConflict, problem.TypeQueueClosed, "this queue takes no new entries")
	case errors.Is(err, queue.ErrFull):
		// Not a retry storm: the hint is long, and jittered.
		p = problem.New(http.StatusServiceUnavailable, problem.TypeQueueFull, "the line is full; try again later").
			WithRetryAfter(queue.Jitter(queue.MaxRetryAfter))
	case errors.Is(err, queue.ErrUnavailable):
		h.log.Warn("backend unavailable", "path", c.FullPath(), "err", err)
		p = problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable, "the waiting room's store is not answering; try again shortly").
			WithRetryAfter(unavailableRetry)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		c.Status(499)
		return
	case errors.Is(err, context.DeadlineExceeded):
		h.log.Warn("request timed out", "path", c.FullPath(), "err", err)
		p = problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable, "the request timed out; try again shortly").
			WithRetryAfter(unavailableRetry)
	default:
		h.log.Error("request failed", "path", c.FullPath(), "err", err)
		p = problem.New(http.StatusInternalServerError, problem.TypeInternal, "internal error")
	}
	problem.Write(c.Writer, c.Request, p)
	c.Abort()
}

// challengePath is where the queue of this request hands out challenges.
func challengePath(c *gin.Context) string {
	return "/api/v1/queues/" + c.Param("queueId") + "/challenge"
}

func fieldErrors(fs []queue.FieldError) []problem.FieldError {
	out := make([]problem.FieldError, len(fs))
	for i, f := range fs {
		out[i] = problem.FieldError{Field: f.Field, Message: f.Message}
	}
	return out
}
