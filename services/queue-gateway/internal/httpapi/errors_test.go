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
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// TestFailAnswersEveryUseCaseError pins the gateway's error table: for each
// error the status, problem type, detail, field errors, Retry-After and the
// one log line (level and message) it leads to.
func TestFailAnswersEveryUseCaseError(t *testing.T) {
	const noLog = ""
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		typ        string
		detail     string
		fields     []problem.FieldError
		retryAfter string // "jitter": 9 or 10 seconds, queue.Jitter of the longest hint
		level      string
		msg        string
	}{
		{"a problem passes through", problem.New(http.StatusTeapot, "teapot", "short and stout"),
			http.StatusTeapot, "teapot", "short and stout", nil, "", noLog, ""},
		{"invalid queue id", fmt.Errorf("enter: %w", app.ErrInvalidQueueID), 400, problem.TypeInvalidQueueID,
			"queue ids are 1 to 64 characters: lower-case letters, digits and '-', starting with a letter or digit", nil, "", noLog, ""},
		{"invalid user id", app.ErrInvalidUserID, 400, problem.TypeInvalidUserID,
			"the token's subject is not a valid user id", nil, "", noLog, ""},
		{"invalid config", &app.InvalidConfigError{Fields: []queue.FieldError{{Field: "rate", Message: "must be positive"}}},
			400, problem.TypeValidation, "the queue configuration has invalid fields",
			[]problem.FieldError{{Field: "rate", Message: "must be positive"}}, "", noLog, ""},
		{"challenge required", queue.ErrChallengeRequired, 428, problem.TypeChallengeRequired,
			"this queue asks new entrants to solve a challenge: POST /api/v1/queues/sale/challenge, then enter again with the solution in X-Enter-Challenge",
			nil, "", noLog, ""},
		{"challenge failed", fmt.Errorf("%w: %w", queue.ErrChallengeFailed, errors.New("expired")), 403, problem.TypeChallengeFailed,
			"the challenge solution is wrong, expired, already used, or below the queue's current difficulty: fetch a new challenge", nil, "", noLog, ""},
		{"challenge not required", app.ErrChallengeNotRequired, 409, problem.TypeChallengeNotRequired,
			"this queue asks for no challenge: enter directly", nil, "", noLog, ""},
		{"not found", queue.ErrNotFound, 404, problem.TypeQueueNotFound, "no queue with this id", nil, "", noLog, ""},
		{"closed", queue.ErrClosed, 409, problem.TypeQueueClosed, "this queue takes no new entries", nil, "", noLog, ""},
		{"full", queue.ErrFull, 503, problem.TypeQueueFull, "the line is full; try again later", nil, "jitter", noLog, ""},
		{"store down", fmt.Errorf("%w: dial tcp: refused", queue.ErrUnavailable), 503, problem.TypeBackendUnavailable,
			"the waiting room's store is not answering; try again shortly", nil, "2", "WARN", "backend unavailable"},
		{"timed out", fmt.Errorf("enter: %w", context.DeadlineExceeded), 503, problem.TypeBackendUnavailable,
			"the request timed out; try again shortly", nil, "2", "WARN", "request timed out"},
		{"unexpected", errors.New("ERR script bug"), 500, problem.TypeInternal, "internal error", nil, "", "ERROR", "request failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := &handler{log: slog.New(slog.NewJSONHandler(&logs, nil))}
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/queues/sale/enter", nil)
			c.Params = gin.Params{{Key: "queueId", Value: "sale"}}
			h.fail(c, tc.err)

			var p problem.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			retryAfter := rec.Header().Get("Retry-After")
			if tc.retryAfter == "jitter" && (retryAfter == "9" || retryAfter == "10") {
				retryAfter = "jitter"
			}
			if rec.Code != tc.status || p.Status != tc.status || p.Type != tc.typ || p.Detail != tc.detail ||
				fmt.Sprint(p.Errors) != fmt.Sprint(tc.fields) || retryAfter != tc.retryAfter || !c.IsAborted() {
				t.Errorf("%d %+v Retry-After %q aborted %v; want %d %q %q %v Retry-After %q, aborted",
					rec.Code, p, rec.Header().Get("Retry-After"), c.IsAborted(), tc.status, tc.typ, tc.detail, tc.fields, tc.retryAfter)
			}
			if got := logLine(t, &logs); got != tc.level+" "+tc.msg {
				t.Errorf("logged %q, want %q", got, tc.level+" "+tc.msg)
			}
		})
	}
}

// logLine is the level and message of the one line in logs, or " " when
// there is none; more than one line fails the test.
func logLine(t *testing.T, logs *bytes.Buffer) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if lines[0] == "" {
		return " "
	}
	if len(lines) > 1 {
		t.Fatalf("logged %d lines, want 1: %q", len(lines), logs)
	}
	var rec struct{ Level, Msg string }
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("log line %q: %v", lines[0], err)
	}
	return rec.Level + " " + rec.Msg
}
