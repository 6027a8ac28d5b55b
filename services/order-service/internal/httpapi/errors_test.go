package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// TestFailAnswersEveryOrderError pins the order path's error table: the
// answer to each error of the order service, and what it logs.
func TestFailAnswersEveryOrderError(t *testing.T) {
	unavailable := "the order path is unavailable; if your entry token was used it is given back"
	for _, tc := range []struct {
		err        error
		status     int
		typ        string
		detail     string
		fields     string
		retryAfter string
		logged     string // level and message of the one log line, if any
	}{
		{&order.InvalidProductError{Fields: []queue.FieldError{{Field: "price", Message: "must be positive"}}},
			400, problem.TypeValidation, "invalid product", "[{price must be positive}]", "", ""},
		{fmt.Errorf("screen: %w", &order.RateLimitedError{RetryAfter: 1500 * time.Millisecond, PerUser: true}),
			429, problem.TypeRateLimited, "too many order requests without a usable entry token from this user", "[]", "2", ""},
		{&order.RateLimitedError{RetryAfter: 300 * time.Millisecond},
			429, problem.TypeRateLimited, "too many orders for this queue right now; your entry token was not used", "[]", "1", ""},
		{order.ErrTokenSpent, 403, problem.TypeInvalidEntryToken,
			"the entry token is missing, wrong, expired, used, or not yours for this queue", "[]", "", ""},
		{&queue.NotActiveError{Wait: 3 * time.Second}, 425, problem.TypeTokenNotActive, "your entry token activates shortly", "[]", "3", ""},
		{order.ErrInvalidRequest, 400, problem.TypeValidation, "the order request is invalid", "[]", "", ""},
		{order.ErrSoldOut, 409, problem.TypeSoldOut, "not enough stock left for this order", "[]", "", ""},
		{order.ErrOrderLimitReached, 409, problem.TypeOrderLimitReached, "you have as many orders in this sale as one person may place; your entry token is used up", "[]", "", ""},
		{order.ErrProductNotFound, 400, problem.TypeProductNotFound, "no such product in this queue; your entry token is given back", "[]", "", ""},
		{order.ErrOrderNotFound, 404, problem.TypeOrderNotFound, "no such order", "[]", "", ""},
		{order.ErrDuplicateToken, 409, problem.TypeTokenAlreadyUsed, "an order was already placed with this entry token", "[]", "", ""},
		{order.ErrIdempotencyInProgress, 409, problem.TypeIdempotencyInProgress, "a request with this Idempotency-Key is still running", "[]", "1", ""},
		{fmt.Errorf("%w: %w", order.ErrUnavailable, errors.New("conn refused")), 503, problem.TypeBackendUnavailable, unavailable, "[]", "2",
			"WARN dependency unavailable"},
		{errors.Join(errors.New("settle"), queue.ErrUnavailable), 503, problem.TypeBackendUnavailable, unavailable, "[]", "2",
			"WARN dependency unavailable"},
		{context.DeadlineExceeded, 503, problem.TypeBackendUnavailable, unavailable, "[]", "2", "WARN dependency unavailable"},
		{errors.New("pq: syntax error"), 500, problem.TypeInternal, "internal error", "[]", "", "ERROR request failed"},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			var logs bytes.Buffer
			h := &handler{log: slog.New(slog.NewJSONHandler(&logs, nil))}
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/orders", nil)
			h.fail(c, tc.err)

			var p problem.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if rec.Code != tc.status || p.Status != tc.status || p.Type != tc.typ || p.Detail != tc.detail ||
				fmt.Sprint(p.Errors) != tc.fields || rec.Header().Get("Retry-After") != tc.retryAfter || !c.IsAborted() {
				t.Errorf("%d %+v Retry-After %q aborted %v; want %d %q %q %s Retry-After %q, aborted",
					rec.Code, p, rec.Header().Get("Retry-After"), c.IsAborted(), tc.status, tc.typ, tc.detail, tc.fields, tc.retryAfter)
			}
			var line struct{ Level, Msg string }
			if logs.Len() > 0 {
				if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
					t.Fatalf("logs %q: %v", logs.String(), err)
				}
			}
			if got := line.Level + " " + line.Msg; got != tc.logged && !(tc.logged == "" && got == " ") {
				t.Errorf("logged %q, want %q", logs.String(), tc.logged)
			}
		})
	}
}
