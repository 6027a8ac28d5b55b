package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// unavailableRetry is the Retry-After sent while a dependency is down.
const unavailableRetry = 2 * time.Second

// problems is the gateway's table from the use cases' errors to problem
// responses, first match first; httpserver.Problems adds the answers every
// service shares (499 for a client gone, 500 for an error not listed).
var problems = httpserver.NewProblems(
	// A handler that already knows its answer sends it as the error.
	httpserver.As(func(p *problem.Problem) *problem.Problem { return p }),
	httpserver.Is(app.ErrInvalidQueueID, problem.New(http.StatusBadRequest, problem.TypeInvalidQueueID,
		"queue ids are 1 to 64 characters: lower-case letters, digits and '-', starting with a letter or digit")),
	httpserver.Is(app.ErrInvalidUserID, problem.New(http.StatusBadRequest, problem.TypeInvalidUserID,
		"the token's subject is not a valid user id")),
	httpserver.As(func(e *app.InvalidConfigError) *problem.Problem {
		return problem.New(http.StatusBadRequest, problem.TypeValidation, "the queue configuration has invalid fields").
			WithErrors(fieldErrors(e.Fields))
	}),
	httpserver.IsFunc(queue.ErrChallengeRequired, func(c *gin.Context) *problem.Problem {
		return problem.New(http.StatusPreconditionRequired, problem.TypeChallengeRequired,
			"this queue asks new entrants to solve a challenge: POST "+challengePath(c)+", then enter again with the solution in "+challengeHeader)
	}),
	httpserver.Is(queue.ErrChallengeFailed, problem.New(http.StatusForbidden, problem.TypeChallengeFailed,
		"the challenge solution is wrong, expired, already used, or below the queue's current difficulty: fetch a new challenge")),
	httpserver.Is(app.ErrTicketInvalid, problem.New(http.StatusForbidden, problem.TypeTicketInvalid,
		"the "+ticketHeader+" ticket was not issued to you for this queue: poll without it to get yours")),
	httpserver.Is(app.ErrChallengeNotRequired, problem.New(http.StatusConflict, problem.TypeChallengeNotRequired,
		"this queue asks for no challenge: enter directly")),
	httpserver.Is(queue.ErrStarted, problem.New(http.StatusConflict, problem.TypeQueueStarted,
		"this queue has started and its pre-queue was drawn: its startsAt can no longer change (create a new queue for another sale)")),
	httpserver.Is(queue.ErrShardsFixed, problem.New(http.StatusConflict, problem.TypeShardsFixed,
		"this queue has people in it (waiting, pre-queued, holding a token or ordering): its shards can change only once it is empty")),
	httpserver.Is(app.ErrPreconditionFailed, problem.New(http.StatusPreconditionFailed, problem.TypePreconditionFailed,
		"the queue has changed since the version you read (or exists, for If-None-Match: *): GET it again, look at the change, and send yours with its ETag")),
	httpserver.Is(queue.ErrNotFound, problem.New(http.StatusNotFound, problem.TypeQueueNotFound, "no queue with this id")),
	httpserver.Is(app.ErrNoWordings, problem.New(http.StatusNotFound, problem.TypeNotFound, "this gateway serves no page, so keeps no wording")),
	httpserver.Is(queue.ErrClosed, problem.New(http.StatusConflict, problem.TypeQueueClosed, "this queue takes no new entries")),
	httpserver.IsFunc(queue.ErrFull, func(*gin.Context) *problem.Problem {
		// Not a retry storm: the hint is long, and jittered.
		return problem.New(http.StatusServiceUnavailable, problem.TypeQueueFull, "the line is full; try again later").
			WithRetryAfter(queue.Jitter(queue.MaxRetryAfter))
	}),
	httpserver.Is(queue.ErrUnavailable, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"the waiting room's store is not answering; try again shortly").WithRetryAfter(unavailableRetry)).
		Unavailable("backend unavailable"),
	httpserver.Is(context.DeadlineExceeded, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"the request timed out; try again shortly").WithRetryAfter(unavailableRetry)).
		Unavailable("request timed out"),
)

// fail answers a use case's error through the gateway's problems.
func (h *handler) fail(c *gin.Context, err error) { problems.Fail(c, h.log, err) }

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
