package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

const page = "https://page.example"

func TestCORS(t *testing.T) {
	const (
		methods = "GET,POST,PUT,DELETE,OPTIONS"
		headers = "Authorization,Content-Type,X-Entry-Token,Idempotency-Key,Last-Event-Id,X-Enter-Challenge,X-Queue-Ticket"
		exposed = "Retry-After,Location,Idempotent-Replayed"
	)
	for _, tc := range []struct {
		name          string
		origins       []string
		method, path  string
		origin        string
		preflight     bool // sends Access-Control-Request-Method
		status        int
		ran           int64
		allowOrigin   string
		allowMethods  string
		allowHeaders  string
		exposeHeaders string
		maxAge        string
		vary          []string
	}{
		{name: "no origin", origins: []string{page}, method: "GET", path: "/items/1",
			status: 200, ran: 1},
		{name: "allowed origin", origins: []string{page}, method: "GET", path: "/items/1", origin: page,
			status: 200, ran: 1, allowOrigin: page, exposeHeaders: exposed, vary: []string{"Origin"}},
		{name: "second allowed origin", origins: []string{"http://localhost:8080", page}, method: "GET", path: "/items/1", origin: page,
			status: 200, ran: 1, allowOrigin: page, exposeHeaders: exposed, vary: []string{"Origin"}},
		{name: "denied origin", origins: []string{page}, method: "GET", path: "/items/1", origin: "https://evil.example",
			status: 403},
		{name: "origin with another port", origins: []string{page}, method: "GET", path: "/items/1", origin: page + ":8443",
			status: 403},
		{name: "origin with another scheme", origins: []string{page}, method: "GET", path: "/items/1", origin: "http://page.example",
			status: 403},
		// A browser sends Origin on same-origin fetches too.
		{name: "own origin", origins: []string{page}, method: "GET", path: "/items/1", origin: "http://example.com",
			status: 200, ran: 1},
		{name: "preflight", origins: []string{page}, method: "OPTIONS", path: "/items/1", origin: page, preflight: true,
			status: 204, allowOrigin: page, allowMethods: methods, allowHeaders: headers, maxAge: "600",
			vary: []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}},
		{name: "preflight of an unknown path", origins: []string{page}, method: "OPTIONS", path: "/nope", origin: page, preflight: true,
			status: 204, allowOrigin: page, allowMethods: methods, allowHeaders: headers, maxAge: "600",
			vary: []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}},
		{name: "preflight from a denied origin", origins: []string{page}, method: "OPTIONS", path: "/items/1", origin: "https://evil.example",
			preflight: true, status: 403},
		{name: "POST from an allowed origin", origins: []string{page}, method: "POST", path: "/upload", origin: page,
			status: 200, ran: 1, allowOrigin: page, exposeHeaders: exposed, vary: []string{"Origin"}},
		// Without origins nothing is added: the browser's same-origin
		// rule refuses the cross-origin read.
		{name: "none configured, cross origin", method: "GET", path: "/items/1", origin: page,
			status: 200, ran: 1},
		{name: "none configured, preflight", method: "OPTIONS", path: "/items/1", origin: page, preflight: true,
			status: 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, httpserver.EngineOptions{CORSOrigins: tc.origins})
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.preflight {
				req.Header.Set("Access-Control-Request-Method", "POST")
				req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
			}
			w := r.do(req)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			if n := r.ran.Load(); n != tc.ran {
				t.Errorf("handler ran %d times, want %d", n, tc.ran)
			}
			for name, want := range map[string]string{
				"Access-Control-Allow-Origin":      tc.allowOrigin,
				"Access-Control-Allow-Methods":     tc.allowMethods,
				"Access-Control-Allow-Headers":     tc.allowHeaders,
				"Access-Control-Expose-Headers":    tc.exposeHeaders,
				"Access-Control-Max-Age":           tc.maxAge,
				"Access-Control-Allow-Credentials": "",
			} {
				if got := w.Header().Get(name); got != want {
					t.Errorf("%s %q, want %q", name, got, want)
				}
			}
			if got := w.Header().Values("Vary"); !slices.Equal(got, tc.vary) {
				t.Errorf("Vary %q, want %q", got, tc.vary)
			}
		})
	}
}

func TestCORSWithoutOriginsIsANoOp(t *testing.T) {
	for _, origins := range [][]string{nil, {}} {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodOptions, "/items/9", nil)
		c.Request.Header.Set("Origin", "https://anyone.example")
		c.Request.Header.Set("Access-Control-Request-Method", "POST")
		httpserver.CORS(origins)(c)
		if c.IsAborted() || len(w.Header()) != 0 {
			t.Errorf("CORS(%#v): aborted %v, headers %v; want neither", origins, c.IsAborted(), w.Header())
		}
	}
}
