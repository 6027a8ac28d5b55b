package httpserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
)

var (
	errGone  = errors.New("gone")
	errNamed = errors.New("named")
	errDown  = errors.New("down")
)

// limitError carries the Retry-After its problem takes; a zero wait is one
// its rule declines.
type limitError struct{ wait time.Duration }

func (e *limitError) Error() string { return fmt.Sprintf("limited for %v", e.wait) }

// testProblems has a rule of each kind; errGone's comes before errDown's.
var testProblems = httpserver.NewProblems(
	httpserver.Is(errGone, problem.New(http.StatusGone, "gone", "it went")),
	httpserver.As(func(e *limitError) *problem.Problem {
		if e.wait == 0 {
			return nil
		}
		return problem.New(http.StatusTooManyRequests, "limited", "slow down").WithRetryAfter(e.wait)
	}),
	httpserver.IsFunc(errNamed, func(c *gin.Context) *problem.Problem {
		return problem.New(http.StatusConflict, "named", "queue "+c.Param("id"))
	}),
	httpserver.Is(errDown, problem.New(http.StatusServiceUnavailable, "down", "try again").WithRetryAfter(2*time.Second)).
		Unavailable("store down"),
)

// entry is one recorded log line: its level, message and route.
type entry struct {
	level slog.Level
	msg   string
	path  string
}

// recorder is a slog handler that keeps every line.
type recorder struct {
	mu      sync.Mutex
	entries []entry
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	e := entry{level: rec.Level, msg: rec.Message}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "path" {
			e.path = a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, e)
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// failOn fails GET /queues/sale with err on the route /queues/:id, and says
// whether a handler after the failing one ran.
func failOn(t *testing.T, err error) (*httptest.ResponseRecorder, []entry, bool) {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	rec := &recorder{}
	log := slog.New(rec)
	ranOn := false
	e.GET("/queues/:id",
		func(c *gin.Context) { testProblems.Fail(c, log, err) },
		func(*gin.Context) { ranOn = true })
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/queues/sale", nil))
	return w, rec.entries, ranOn
}

func TestProblemsFail(t *testing.T) {
	const route = "/queues/:id"
	gone := `{"type":"gone","title":"Gone","status":410,"detail":"it went","instance":"/queues/sale"}` + "\n"
	down := `{"type":"down","title":"Service Unavailable","status":503,"detail":"try again","instance":"/queues/sale","retryAfterMs":2000}` + "\n"
	internal := `{"type":"internal-error","title":"Internal Server Error","status":500,"detail":"internal error","instance":"/queues/sale"}` + "\n"
	for _, tc := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
		body       string
		logs       []entry
	}{
		{"Is", errGone, 410, "", gone, nil},
		{"Is through %w", fmt.Errorf("load: %w", errGone), 410, "", gone, nil},
		{"Is through errors.Join", errors.Join(errors.New("first"), errGone), 410, "", gone, nil},
		{"As takes the error's Retry-After", fmt.Errorf("charge: %w", &limitError{wait: 1500 * time.Millisecond}), 429, "2",
			`{"type":"limited","title":"Too Many Requests","status":429,"detail":"slow down","instance":"/queues/sale","retryAfterMs":1500}` + "\n", nil},
		{"As declining passes the error on", &limitError{}, 500, "", internal,
			[]entry{{slog.LevelError, "request failed", route}}},
		{"IsFunc reads the request", errNamed, 409, "",
			`{"type":"named","title":"Conflict","status":409,"detail":"queue sale","instance":"/queues/sale"}` + "\n", nil},
		{"Unavailable logs at warn with the route", fmt.Errorf("read: %w", errDown), 503, "2", down,
			[]entry{{slog.LevelWarn, "store down", route}}},
		{"the first matching rule wins", errors.Join(errDown, errGone), 410, "", gone, nil},
		{"no rule matches", errors.New("surprise"), 500, "", internal,
			[]entry{{slog.LevelError, "request failed", route}}},
		{"a deadline no rule lists", context.DeadlineExceeded, 500, "", internal,
			[]entry{{slog.LevelError, "request failed", route}}},
		{"cancelled", fmt.Errorf("read: %w", context.Canceled), 499, "", "", nil},
		{"cancelled beats every rule", errors.Join(errGone, context.Canceled), 499, "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, logs, ranOn := failOn(t, tc.err)
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retryAfter || w.Body.String() != tc.body || ranOn {
				t.Errorf("%d Retry-After %q body %q, later handler ran %v; want %d Retry-After %q body %q, later handler not run",
					w.Code, w.Header().Get("Retry-After"), w.Body, ranOn, tc.status, tc.retryAfter, tc.body)
			}
			if fmt.Sprint(logs) != fmt.Sprint(tc.logs) {
				t.Errorf("logged %v, want %v", logs, tc.logs)
			}
			if ctype := w.Header().Get("Content-Type"); tc.body != "" && ctype != problem.ContentType {
				t.Errorf("Content-Type %q, want %q", ctype, problem.ContentType)
			}
		})
	}
}

// TestProblemsIsAnswersWithACopy: Write fills in the instance and
// retryAfterMs of the problem it sends, so each request must get its own
// copy of an Is rule's problem, not the table's.
func TestProblemsIsAnswersWithACopy(t *testing.T) {
	log := slog.New(&recorder{})
	for _, path := range []string{"/queues/a", "/queues/b"} {
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodGet, path, nil)
		testProblems.Fail(c, log, errDown)
		p := testProblems.Problem(c, log, errDown)
		if p.Instance != "" || p.RetryAfterMs != 0 || p.RetryAfter != 2*time.Second {
			t.Fatalf("after answering %s the rule's problem is %+v, want a fresh one", path, *p)
		}
	}
}

// TestProblemsProblemLogsAsFailDoes: a caller that stores the answer itself
// gets the same problem and the same log line.
func TestProblemsProblemLogsAsFailDoes(t *testing.T) {
	rec := &recorder{}
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodGet, "/queues/sale", nil)
	p := testProblems.Problem(c, slog.New(rec), fmt.Errorf("x: %w", errDown))
	if p.Status != 503 || p.Type != "down" || p.RetryAfter != 2*time.Second || len(rec.entries) != 1 ||
		rec.entries[0].level != slog.LevelWarn || rec.entries[0].msg != "store down" {
		t.Errorf("problem %+v, logs %v; want 503 down with 2s and one warn line", *p, rec.entries)
	}
}
