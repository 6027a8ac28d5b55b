package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// The audit trail: GET /admin/v1/audit lists the operators' changes of the
// queues, newest first, a page at a time.

var auditProblems = httpserver.NewProblems(
	httpserver.As(func(p *problem.Problem) *problem.Problem { return p }),
	httpserver.Is(audit.ErrInvalidFilter, problem.New(http.StatusBadRequest, problem.TypeValidation,
		"queueId, since, until, limit (1 to 1000) or after is not valid")),
	httpserver.Is(order.ErrUnavailable, problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable,
		"the audit trail's database is not answering; try again shortly").WithRetryAfter(2*time.Second)).Unavailable("audit database unavailable"),
)

type changeView struct {
	EventID string          `json:"eventId"`
	QueueID string          `json:"queueId"`
	Actor   string          `json:"actor"`
	Address string          `json:"clientAddress"`
	Action  string          `json:"action"`
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
	ETag    string          `json:"etag"`
	Outcome string          `json:"outcome"`
	Refusal string          `json:"refusal,omitempty"`
	At      time.Time       `json:"occurredAt"`
}

type auditRoutes struct {
	trail *audit.Service
	log   *slog.Logger
}

func (r auditRoutes) list(c *gin.Context) {
	f := audit.Filter{QueueID: c.Query("queueId"), After: c.Query("after")}
	if err := queryTimes(c, map[string]*time.Time{"since": &f.Since, "until": &f.Until}); err != nil {
		auditProblems.Fail(c, r.log, err)
		return
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			auditProblems.Fail(c, r.log, problem.New(http.StatusBadRequest, problem.TypeValidation, "limit is not a number"))
			return
		}
		f.Limit = n
	}
	page, err := r.trail.List(c, f)
	if err != nil {
		auditProblems.Fail(c, r.log, err)
		return
	}
	out := make([]changeView, len(page.Changes))
	for i, ch := range page.Changes {
		out[i] = changeView{EventID: ch.EventID, QueueID: ch.QueueID, Actor: ch.Actor, Address: ch.Address, Action: ch.Action,
			Before: orNull(ch.Before), After: orNull(ch.After), ETag: ch.ETag, Outcome: ch.Outcome, Refusal: ch.Refusal, At: ch.At}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"changes": out, "next": page.Next})
}

// queryTimes reads each named query parameter given into its time (RFC
// 3339); a bad one is a 400 problem naming it.
func queryTimes(c *gin.Context, into map[string]*time.Time) error {
	for name, dst := range into {
		if v := c.Query(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return problem.New(http.StatusBadRequest, problem.TypeValidation, name+" is not an RFC 3339 time")
			}
			*dst = t
		}
	}
	return nil
}

func orNull(j json.RawMessage) json.RawMessage {
	if j == nil {
		return json.RawMessage("null")
	}
	return j
}
