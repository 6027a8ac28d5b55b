package problem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/problem"
)

func TestNewTakesTheTitleFromTheStatus(t *testing.T) {
	for _, tc := range []struct {
		status int
		title  string
	}{
		{http.StatusBadRequest, "Bad Request"},
		{http.StatusNotFound, "Not Found"},
		{http.StatusRequestEntityTooLarge, "Request Entity Too Large"},
		{http.StatusTooManyRequests, "Too Many Requests"},
		{http.StatusServiceUnavailable, "Service Unavailable"},
		// A status net/http has no text for gets an empty title, which is
		// still sent: the member is not optional.
		{599, ""},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			p := problem.New(tc.status, problem.TypeBadRequest, "why")
			want := problem.Problem{Type: problem.TypeBadRequest, Title: tc.title, Status: tc.status, Detail: "why"}
			if p.Type != want.Type || p.Title != want.Title || p.Status != want.Status || p.Detail != want.Detail ||
				p.Instance != "" || p.Errors != nil || p.RetryAfter != 0 || p.RetryAfterMs != 0 {
				t.Errorf("New(%d) = %+v, want %+v", tc.status, *p, want)
			}
		})
	}
}

func TestBuildersReturnTheSameProblem(t *testing.T) {
	p := problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable, "down")
	if got := p.WithRetryAfter(3 * time.Second); got != p || p.RetryAfter != 3*time.Second {
		t.Errorf("WithRetryAfter: got %p (RetryAfter %v), want %p with 3s", got, p.RetryAfter, p)
	}
	errs := []problem.FieldError{{Field: "quantity", Message: "must be 1 to 10"}}
	if got := p.WithErrors(errs); got != p || len(p.Errors) != 1 || p.Errors[0] != errs[0] {
		t.Errorf("WithErrors: got %p (Errors %v), want %p with %v", got, p.Errors, p, errs)
	}
}

func TestErrorNamesTypeAndDetail(t *testing.T) {
	for _, tc := range []struct {
		p    *problem.Problem
		want string
	}{
		{problem.New(http.StatusNotFound, problem.TypeNotFound, "no such resource"), "not-found: no such resource"},
		{problem.New(http.StatusNotFound, problem.TypeNotFound, ""), "not-found: "},
	} {
		var err error = tc.p
		if err.Error() != tc.want {
			t.Errorf("Error() = %q, want %q", err.Error(), tc.want)
		}
	}
}

func TestRetryAfterSecondsRoundsUpToAtLeastOne(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Hour, "1"},
		{-1, "1"},
		{0, "1"},
		{1, "1"},
		{500 * time.Microsecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + 1, "2"},
		{1500 * time.Millisecond, "2"},
		{2 * time.Second, "2"},
		{59*time.Second + 999*time.Millisecond, "60"},
		{time.Hour, "3600"},
		{24 * time.Hour, "86400"},
	} {
		if got := problem.RetryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("RetryAfterSeconds(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestWriteSendsTheExactDocument pins the wire format clients parse: member
// names and order, which members are omitted, the headers.
func TestWriteSendsTheExactDocument(t *testing.T) {
	for _, tc := range []struct {
		name       string
		target     string
		nilRequest bool
		p          *problem.Problem
		status     int
		retryAfter string
		body       string
	}{
		{
			name:   "minimal",
			target: "/queues/sale/enter",
			p:      problem.New(http.StatusNotFound, problem.TypeNotFound, "no such resource"),
			status: 404,
			body:   `{"type":"not-found","title":"Not Found","status":404,"detail":"no such resource","instance":"/queues/sale/enter"}` + "\n",
		},
		{
			name:   "empty detail is omitted",
			target: "/x",
			p:      problem.New(http.StatusInternalServerError, problem.TypeInternal, ""),
			status: 500,
			body:   `{"type":"internal-error","title":"Internal Server Error","status":500,"instance":"/x"}` + "\n",
		},
		{
			name:   "instance is the path without the query",
			target: "/queues/sale/position?token=secret",
			p:      problem.New(http.StatusBadRequest, problem.TypeBadRequest, "bad"),
			status: 400,
			body:   `{"type":"bad-request","title":"Bad Request","status":400,"detail":"bad","instance":"/queues/sale/position"}` + "\n",
		},
		{
			name:   "a set instance is kept",
			target: "/orders",
			p: func() *problem.Problem {
				p := problem.New(http.StatusConflict, "order-conflict", "taken")
				p.Instance = "/orders/42"
				return p
			}(),
			status: 409,
			body:   `{"type":"order-conflict","title":"Conflict","status":409,"detail":"taken","instance":"/orders/42"}` + "\n",
		},
		{
			name:       "no request, no instance",
			nilRequest: true,
			p:          problem.New(http.StatusForbidden, problem.TypeForbidden, "no"),
			status:     403,
			body:       `{"type":"forbidden","title":"Forbidden","status":403,"detail":"no"}` + "\n",
		},
		{
			name:   "field errors in order",
			target: "/orders",
			p: problem.New(http.StatusBadRequest, problem.TypeValidation, "invalid fields").WithErrors([]problem.FieldError{
				{Field: "quantity", Message: "must be 1 to 10"},
				{Field: "productId", Message: "required"},
			}),
			status: 400,
			body: `{"type":"validation-failed","title":"Bad Request","status":400,"detail":"invalid fields","instance":"/orders",` +
				`"errors":[{"field":"quantity","message":"must be 1 to 10"},{"field":"productId","message":"required"}]}` + "\n",
		},
		{
			name:   "empty field errors are omitted",
			target: "/orders",
			p:      problem.New(http.StatusBadRequest, problem.TypeValidation, "v").WithErrors([]problem.FieldError{}),
			status: 400,
			body:   `{"type":"validation-failed","title":"Bad Request","status":400,"detail":"v","instance":"/orders"}` + "\n",
		},
		{
			name:       "retry after in whole seconds up, and in milliseconds",
			target:     "/q",
			p:          problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable, "down").WithRetryAfter(1500 * time.Millisecond),
			status:     503,
			retryAfter: "2",
			body:       `{"type":"backend-unavailable","title":"Service Unavailable","status":503,"detail":"down","instance":"/q","retryAfterMs":1500}` + "\n",
		},
		{
			name:       "retry after of exactly a second",
			target:     "/q",
			p:          problem.New(http.StatusTooManyRequests, problem.TypeRateLimited, "slow down").WithRetryAfter(time.Second),
			status:     429,
			retryAfter: "1",
			body:       `{"type":"rate-limited","title":"Too Many Requests","status":429,"detail":"slow down","instance":"/q","retryAfterMs":1000}` + "\n",
		},
		{
			// The header rounds up to 1; the body's milliseconds truncate
			// to 0, which omitempty drops.
			name:       "sub-millisecond retry after",
			target:     "/q",
			p:          problem.New(http.StatusTooManyRequests, problem.TypeRateLimited, "r").WithRetryAfter(500 * time.Microsecond),
			status:     429,
			retryAfter: "1",
			body:       `{"type":"rate-limited","title":"Too Many Requests","status":429,"detail":"r","instance":"/q"}` + "\n",
		},
		{
			name:   "zero retry after sends no hint",
			target: "/q",
			p:      problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable, "down").WithRetryAfter(0),
			status: 503,
			body:   `{"type":"backend-unavailable","title":"Service Unavailable","status":503,"detail":"down","instance":"/q"}` + "\n",
		},
		{
			name:   "negative retry after sends no hint",
			target: "/q",
			p:      problem.New(http.StatusServiceUnavailable, problem.TypeBackendUnavailable, "down").WithRetryAfter(-time.Second),
			status: 503,
			body:   `{"type":"backend-unavailable","title":"Service Unavailable","status":503,"detail":"down","instance":"/q"}` + "\n",
		},
		{
			name:   "HTML in the detail is escaped",
			target: "/q",
			p:      problem.New(http.StatusBadRequest, problem.TypeBadRequest, `<script>"x"&</script>`),
			status: 400,
			body:   `{"type":"bad-request","title":"Bad Request","status":400,"detail":"\u003cscript\u003e\"x\"\u0026\u003c/script\u003e","instance":"/q"}` + "\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *http.Request
			if !tc.nilRequest {
				r = httptest.NewRequest(http.MethodGet, tc.target, nil)
			}
			w := httptest.NewRecorder()
			problem.Write(w, r, tc.p)

			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			if got := w.Body.String(); got != tc.body {
				t.Errorf("body\n got %s\nwant %s", got, tc.body)
			}
			for name, want := range map[string]string{
				"Content-Type":  problem.ContentType,
				"Cache-Control": "no-store",
				"Retry-After":   tc.retryAfter,
			} {
				if got := w.Header().Get(name); got != want {
					t.Errorf("%s %q, want %q", name, got, want)
				}
			}
			if n := len(w.Header().Values("Retry-After")); tc.retryAfter != "" && n != 1 {
				t.Errorf("%d Retry-After headers, want 1", n)
			}
		})
	}
}

func TestContentTypeIsProblemJSON(t *testing.T) {
	if problem.ContentType != "application/problem+json" {
		t.Errorf("ContentType %q", problem.ContentType)
	}
}

// TestTypesAreStable pins the published problem types: clients switch on
// them, so a rename is a breaking change.
func TestTypesAreStable(t *testing.T) {
	for got, want := range map[string]string{
		problem.TypeBadRequest:         "bad-request",
		problem.TypeValidation:         "validation-failed",
		problem.TypeBodyTooLarge:       "body-too-large",
		problem.TypeUnauthorized:       "unauthorized",
		problem.TypeForbidden:          "forbidden",
		problem.TypeNotFound:           "not-found",
		problem.TypeMethodNotAllowed:   "method-not-allowed",
		problem.TypeRateLimited:        "rate-limited",
		problem.TypeBackendUnavailable: "backend-unavailable",
		problem.TypeInternal:           "internal-error",
		problem.TypeUnsupportedMedia:   "unsupported-media-type",
	} {
		if got != want {
			t.Errorf("type %q, want %q", got, want)
		}
	}
}
