package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// problems is the table from the stream domain's refusals to problem
// responses, first match first; httpserver.Problems adds the answers every
// service shares (499 for a client gone, 500 for an error not listed).
// None is logged: the stream service counts every refusal by its reason.
var problems = httpserver.NewProblems(
	httpserver.Is(stream.ErrInvalidQueue, problem.New(http.StatusBadRequest, problem.TypeInvalidQueueID, "not a valid queue id")),
	httpserver.Is(stream.ErrForeignUser, problem.New(http.StatusForbidden, problem.TypeForbidden,
		"a stream can only be opened for the token's own user")),
	httpserver.Is(stream.ErrTicketInvalid, problem.New(http.StatusForbidden, problem.TypeTicketInvalid,
		"the ticket was not issued to you for this queue: open the stream without it, or with the one your last position answer gave")),
	httpserver.Is(queue.ErrNotFound, problem.New(http.StatusNotFound, problem.TypeQueueNotFound, "no queue with this id")),
	httpserver.Is(stream.ErrUnavailable, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"the waiting room's store is not answering").WithRetryAfter(2*time.Second)),
	httpserver.Is(hub.ErrShut, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"this replica is stopping; connect again").WithRetryAfter(time.Second)),
	httpserver.Is(hub.ErrUserCap, problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
		"too many open streams for this user").WithRetryAfter(10*time.Second)),
	httpserver.Is(hub.ErrIPCap, problem.New(http.StatusTooManyRequests, problem.TypeRateLimited,
		"too many open streams from this address").WithRetryAfter(10*time.Second)),
)

// fail answers a refused stream request with its problem. Register is given
// no logger, so an error the table does not list is logged by the default
// one.
func fail(c *gin.Context, err error) { problems.Fail(c, slog.Default(), err) }
