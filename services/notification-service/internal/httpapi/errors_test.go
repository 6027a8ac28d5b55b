package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

func TestFailAnswersEachRefusalWithItsProblem(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		typ        string
		retryAfter string
	}{
		{stream.ErrInvalidQueue, 400, "invalid-queue-id", ""},
		{stream.ErrForeignUser, 403, "forbidden", ""},
		{fmt.Errorf("stream: %w", queue.ErrNotFound), 404, "queue-not-found", ""},
		{fmt.Errorf("%w: %w", stream.ErrUnavailable, errors.New("dial tcp: refused")), 503, "backend-unavailable", "2"},
		{hub.ErrShut, 503, "backend-unavailable", "1"},
		{hub.ErrUserCap, 429, "rate-limited", "10"},
		{hub.ErrIPCap, 429, "rate-limited", "10"},
	}
	for _, c := range cases {
		t.Run(c.err.Error(), func(t *testing.T) {
			rec := httptest.NewRecorder()
			gc, _ := gin.CreateTestContext(rec)
			gc.Request = httptest.NewRequest(http.MethodGet, "/api/v1/queues/q1/events", nil)
			fail(gc, c.err)
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if rec.Code != c.status || p.Status != c.status || p.Type != c.typ || rec.Header().Get("Retry-After") != c.retryAfter ||
				rec.Header().Get("Content-Type") != "application/problem+json" || !gc.IsAborted() {
				t.Fatalf("%d %s %q Retry-After %q aborted %v; want %d %q Retry-After %q, problem+json, aborted",
					rec.Code, rec.Header().Get("Content-Type"), p.Type, rec.Header().Get("Retry-After"), gc.IsAborted(), c.status, c.typ, c.retryAfter)
			}
		})
	}
}

// TestFailExplainsEachRefusal pins the detail of each refusal's problem.
func TestFailExplainsEachRefusal(t *testing.T) {
	for err, detail := range map[error]string{
		stream.ErrInvalidQueue: "not a valid queue id",
		stream.ErrForeignUser:  "a stream can only be opened for the token's own user",
		queue.ErrNotFound:      "no queue with this id",
		fmt.Errorf("%w: %w", stream.ErrUnavailable, errors.New("i/o timeout")): "the waiting room's store is not answering",
		hub.ErrShut:    "this replica is stopping; connect again",
		hub.ErrUserCap: "too many open streams for this user",
		hub.ErrIPCap:   "too many open streams from this address",
	} {
		rec := httptest.NewRecorder()
		gc, _ := gin.CreateTestContext(rec)
		gc.Request = httptest.NewRequest(http.MethodGet, "/api/v1/queues/q1/events", nil)
		fail(gc, err)
		var p struct{ Detail string }
		if json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Detail != detail {
			t.Errorf("%v: body %q, want the detail %q", err, rec.Body, detail)
		}
	}
}
