package httpapi

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/throttle"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/push"
)

// Web Push: the page asks for the VAPID key, subscribes its browser while
// its person waits and unsubscribes when they leave; the push itself goes
// out on TokenIssued (push.Service.Issued).

// pushProblems maps the push service's refusals; httpserver.Problems adds
// the shared answers.
var pushProblems = httpserver.NewProblems(
	httpserver.Is(push.ErrOff, problem.New(http.StatusNotFound, problem.TypeNotFound,
		"Web Push is not configured on this waiting room")),
	httpserver.Is(push.ErrInvalidQueue, problem.New(http.StatusBadRequest, problem.TypeInvalidQueueID, "not a valid queue id")),
	httpserver.As(func(e *push.InvalidError) *problem.Problem {
		fields := make([]problem.FieldError, len(e.Fields))
		for i, f := range e.Fields {
			fields[i] = problem.FieldError{Field: f.Field, Message: f.Message}
		}
		return problem.New(http.StatusBadRequest, problem.TypeValidation, "the subscription cannot be used").WithErrors(fields)
	}),
	httpserver.Is(push.ErrNoSubscription, problem.New(http.StatusNotFound, problem.TypeNotFound, "no subscription with this id for you in this queue")),
	httpserver.Is(queue.ErrNotFound, problem.New(http.StatusNotFound, problem.TypeQueueNotFound, "no queue with this id")),
	httpserver.Is(queue.ErrUnavailable, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"the waiting room's store is not answering").WithRetryAfter(2*time.Second)),
)

type pushRoutes struct{ svc *push.Service }

// pushLimit is each user's pace of subscribing and unsubscribing, in
// memory (a page does it once or twice per wait): a flood of them is
// refused 429 before it reaches Redis.
var pushLimit = throttle.Options{PerSec: 1, Burst: 10, InFlight: 2}

func userOf(c *gin.Context) string {
	p, _ := auth.FromContext(c)
	return p.UserID
}

// key answers the VAPID public key (the page's applicationServerKey).
func (r pushRoutes) key(c *gin.Context) {
	k, err := r.svc.Key()
	if err != nil {
		pushProblems.Fail(c, slog.Default(), err)
		return
	}
	c.Header("Cache-Control", "public, max-age=300")
	c.JSON(http.StatusOK, gin.H{"publicKey": k})
}

// subscribe keeps the caller's subscription in the queue: 200 with its id.
func (r pushRoutes) subscribe(c *gin.Context) {
	if ct := c.GetHeader("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusUnsupportedMediaType, problem.TypeUnsupportedMedia, "send the body as application/json"))
			return
		}
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		if httpserver.IsBodyTooLarge(err) {
			problem.Write(c.Writer, c.Request, httpserver.BodyTooLarge())
		} else {
			problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest, "could not read the request body"))
		}
		return
	}
	var req push.Request
	if err := httpserver.DecodeStrict(body, &req); err != nil {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest, "not a subscription: "+err.Error()))
		return
	}
	p, _ := auth.FromContext(c)
	id, err := r.svc.Subscribe(c.Request.Context(), c.Param("queueId"), p.UserID, req)
	if err != nil {
		pushProblems.Fail(c, slog.Default(), err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id})
}

// unsubscribe removes one of the caller's subscriptions: 204.
func (r pushRoutes) unsubscribe(c *gin.Context) {
	p, _ := auth.FromContext(c)
	if err := r.svc.Unsubscribe(c.Request.Context(), c.Param("queueId"), p.UserID, c.Param("id")); err != nil {
		pushProblems.Fail(c, slog.Default(), err)
		return
	}
	c.Status(http.StatusNoContent)
}
