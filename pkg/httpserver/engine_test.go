package httpserver_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
)

// rig is an API engine with a few routes, its registry, its log and how
// many times a route handler ran.
type rig struct {
	engine *gin.Engine
	reg    *prometheus.Registry
	log    *bytes.Buffer
	ran    atomic.Int64
}

// newRig builds the engine with routes GET /items/:id, POST /upload (reads
// the body, answers its length or 413) and GET /panic.
func newRig(t *testing.T, o httpserver.EngineOptions) *rig {
	t.Helper()
	r := &rig{reg: prometheus.NewRegistry(), log: &bytes.Buffer{}}
	o.Service = "test"
	o.Log = slog.New(slog.NewJSONHandler(r.log, nil))
	o.Registry = r.reg
	if o.Health == nil {
		o.Health = httpserver.NewHealth(nil)
	}
	e, err := httpserver.NewEngine(o)
	if err != nil {
		t.Fatal(err)
	}
	e.GET("/items/:id", func(c *gin.Context) {
		r.ran.Add(1)
		c.String(http.StatusOK, "item "+c.Param("id")+" for "+c.ClientIP())
	})
	e.POST("/upload", func(c *gin.Context) {
		r.ran.Add(1)
		n, err := io.Copy(io.Discard, c.Request.Body)
		if httpserver.IsBodyTooLarge(err) {
			problem.Write(c.Writer, c.Request, httpserver.BodyTooLarge())
			return
		}
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		c.String(http.StatusOK, strconv.FormatInt(n, 10))
	})
	e.GET("/panic", func(c *gin.Context) {
		r.ran.Add(1)
		panic("boom")
	})
	r.engine = e
	return r
}

func (r *rig) do(req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r.engine.ServeHTTP(w, req)
	return w
}

// observations counts request_duration_seconds samples by
// "route method code", for service "test" only.
func (r *rig) observations(t *testing.T) map[string]uint64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "waitingroom_http_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["service"] != "test" {
				t.Errorf("service label %q, want test", l["service"])
			}
			got[l["route"]+" "+l["method"]+" "+l["code"]] += m.GetHistogram().GetSampleCount()
		}
	}
	return got
}

func TestUnknownRoutesAndMethodsAreProblems(t *testing.T) {
	r := newRig(t, httpserver.EngineOptions{})
	for _, tc := range []struct {
		method, target string
		status         int
		allow          string
		body           string
	}{
		{method: "GET", target: "/nope", status: 404,
			body: `{"type":"not-found","title":"Not Found","status":404,"detail":"no such resource","instance":"/nope"}` + "\n"},
		{method: "GET", target: "/items", status: 404,
			body: `{"type":"not-found","title":"Not Found","status":404,"detail":"no such resource","instance":"/items"}` + "\n"},
		{method: "POST", target: "/nope?x=1", status: 404,
			body: `{"type":"not-found","title":"Not Found","status":404,"detail":"no such resource","instance":"/nope"}` + "\n"},
		{method: "DELETE", target: "/items/7", status: 405, allow: "GET",
			body: `{"type":"method-not-allowed","title":"Method Not Allowed","status":405,"detail":"method not allowed on this resource","instance":"/items/7"}` + "\n"},
		{method: "GET", target: "/upload", status: 405, allow: "POST",
			body: `{"type":"method-not-allowed","title":"Method Not Allowed","status":405,"detail":"method not allowed on this resource","instance":"/upload"}` + "\n"},
		{method: "POST", target: "/healthz", status: 405, allow: "GET",
			body: `{"type":"method-not-allowed","title":"Method Not Allowed","status":405,"detail":"method not allowed on this resource","instance":"/healthz"}` + "\n"},
		// gin does not answer HEAD from a GET route: a HEAD probe gets 405.
		{method: "HEAD", target: "/healthz", status: 405, allow: "GET",
			body: `{"type":"method-not-allowed","title":"Method Not Allowed","status":405,"detail":"method not allowed on this resource","instance":"/healthz"}` + "\n"},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			w := r.do(httptest.NewRequest(tc.method, tc.target, nil))
			if w.Code != tc.status || w.Body.String() != tc.body {
				t.Errorf("%d %s, want %d %s", w.Code, w.Body, tc.status, tc.body)
			}
			if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
				t.Errorf("Content-Type %q, want %q", ct, problem.ContentType)
			}
			if a := w.Header().Get("Allow"); a != tc.allow {
				t.Errorf("Allow %q, want %q", a, tc.allow)
			}
		})
	}
	if n := r.ran.Load(); n != 0 {
		t.Errorf("route handlers ran %d times, want 0", n)
	}
}

// unsized hides a reader's length, so the request has ContentLength -1, as
// a chunked upload does.
type unsized struct{ io.Reader }

func TestBodyLimit(t *testing.T) {
	const tooLarge = `{"type":"body-too-large","title":"Request Entity Too Large","status":413,"detail":"request body is larger than 65536 bytes","instance":"/upload"}` + "\n"
	for _, tc := range []struct {
		name   string
		size   int
		hidden bool // ContentLength -1
		status int
		body   string
		ran    int64
	}{
		{name: "empty", size: 0, status: 200, body: "0", ran: 1},
		{name: "declared at the limit", size: httpserver.MaxBodyBytes, status: 200, body: "65536", ran: 1},
		// Refused before the handler runs.
		{name: "declared one byte over", size: httpserver.MaxBodyBytes + 1, status: 413, body: tooLarge, ran: 0},
		{name: "declared far over", size: 4 * httpserver.MaxBodyBytes, status: 413, body: tooLarge, ran: 0},
		{name: "undeclared at the limit", size: httpserver.MaxBodyBytes, hidden: true, status: 200, body: "65536", ran: 1},
		// The handler runs and its read fails at the limit.
		{name: "undeclared one byte over", size: httpserver.MaxBodyBytes + 1, hidden: true, status: 413, body: tooLarge, ran: 1},
		{name: "undeclared far over", size: 4 * httpserver.MaxBodyBytes, hidden: true, status: 413, body: tooLarge, ran: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, httpserver.EngineOptions{})
			var body io.Reader = bytes.NewReader(bytes.Repeat([]byte{'x'}, tc.size))
			if tc.hidden {
				body = unsized{body}
			}
			req := httptest.NewRequest(http.MethodPost, "/upload", body)
			if want := int64(tc.size); !tc.hidden && req.ContentLength != want || tc.hidden && req.ContentLength != -1 {
				t.Fatalf("ContentLength %d", req.ContentLength)
			}
			w := r.do(req)
			if w.Code != tc.status || w.Body.String() != tc.body {
				t.Errorf("%d %s, want %d %s", w.Code, w.Body, tc.status, tc.body)
			}
			if n := r.ran.Load(); n != tc.ran {
				t.Errorf("handler ran %d times, want %d", n, tc.ran)
			}
			if got := r.observations(t)["/upload POST "+strconv.Itoa(tc.status)]; got != 1 {
				t.Errorf("%d observations for /upload POST %d, want 1", got, tc.status)
			}
		})
	}
}

func TestIsBodyTooLarge(t *testing.T) {
	mbe := &http.MaxBytesError{Limit: httpserver.MaxBodyBytes}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{io.EOF, false},
		{io.ErrUnexpectedEOF, false},
		{errors.New("http: request body too large"), false},
		{mbe, true},
		{fmt.Errorf("decode: %w", mbe), true},
		{errors.Join(io.EOF, fmt.Errorf("read: %w", mbe)), true},
	} {
		if got := httpserver.IsBodyTooLarge(tc.err); got != tc.want {
			t.Errorf("IsBodyTooLarge(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	p := httpserver.BodyTooLarge()
	if p.Status != 413 || p.Type != problem.TypeBodyTooLarge || p.Title != "Request Entity Too Large" ||
		p.Detail != "request body is larger than 65536 bytes" {
		t.Errorf("BodyTooLarge() = %+v", *p)
	}
}

func TestPanicBecomesAProblemAndIsLogged(t *testing.T) {
	r := newRig(t, httpserver.EngineOptions{})
	w := r.do(httptest.NewRequest(http.MethodGet, "/panic?secret=1", nil))
	const want = `{"type":"internal-error","title":"Internal Server Error","status":500,"detail":"internal error","instance":"/panic"}` + "\n"
	if w.Code != 500 || w.Body.String() != want {
		t.Errorf("%d %s, want 500 %s", w.Code, w.Body, want)
	}
	if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Errorf("Content-Type %q", ct)
	}

	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.log.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		records = append(records, rec)
	}
	if len(records) != 1 {
		t.Fatalf("%d log records, want 1: %s", len(records), r.log)
	}
	for k, v := range map[string]string{"level": "ERROR", "msg": "panic in handler", "path": "/panic", "panic": "boom"} {
		if records[0][k] != v {
			t.Errorf("log %s = %v, want %q", k, records[0][k], v)
		}
	}

	// The engine goes on serving.
	if w := r.do(httptest.NewRequest(http.MethodGet, "/items/1", nil)); w.Code != 200 {
		t.Errorf("after the panic: %d", w.Code)
	}
	if n := r.ran.Load(); n != 2 {
		t.Errorf("handlers ran %d times, want 2", n)
	}
}

// TestRequestMetricsLabels checks that routes are labelled by their
// pattern, never by the raw path (a label per item id or per scanned path
// would grow without bound), and everything unrouted as "unmatched".
func TestRequestMetricsLabels(t *testing.T) {
	r := newRig(t, httpserver.EngineOptions{})
	for _, req := range []struct{ method, target string }{
		{"GET", "/items/1"},
		{"GET", "/items/2"},
		{"GET", "/items/3?x=y"},
		{"GET", "/nope"},
		{"GET", "/wp-admin/setup.php"},
		{"DELETE", "/items/1"},
		{"GET", "/healthz"},
		{"GET", "/readyz"},
	} {
		r.do(httptest.NewRequest(req.method, req.target, nil))
	}
	big := httptest.NewRequest(http.MethodPost, "/upload", bytes.NewReader(make([]byte, httpserver.MaxBodyBytes+1)))
	r.do(big)

	want := map[string]uint64{
		"/items/:id GET 200":   3,
		"unmatched GET 404":    2,
		"unmatched DELETE 405": 1,
		"/healthz GET 200":     1,
		"/readyz GET 200":      1,
		"/upload POST 413":     1,
	}
	got := r.observations(t)
	if len(got) != len(want) {
		t.Errorf("%d series %v, want %d", len(got), got, len(want))
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d observations, want %d", k, got[k], n)
		}
	}
}

func TestClientIPFromTrustedProxiesOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		proxies []string
		xff     string
		want    string
	}{
		{name: "no proxies: the peer", xff: "203.0.113.9", want: "192.0.2.1"},
		{name: "trusted peer: the forwarded client", proxies: []string{"192.0.2.1"}, xff: "203.0.113.9", want: "203.0.113.9"},
		{name: "trusted network", proxies: []string{"192.0.2.0/24"}, xff: "203.0.113.9", want: "203.0.113.9"},
		{name: "untrusted peer: the peer", proxies: []string{"198.51.100.1"}, xff: "203.0.113.9", want: "192.0.2.1"},
		{name: "trusted peer, no header", proxies: []string{"192.0.2.1"}, want: "192.0.2.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, httpserver.EngineOptions{TrustedProxies: tc.proxies})
			req := httptest.NewRequest(http.MethodGet, "/items/1", nil)
			if req.RemoteAddr != "192.0.2.1:1234" {
				t.Fatalf("httptest peer %s", req.RemoteAddr)
			}
			if tc.xff != "" {
				req.Header.Set("X-Forwarded-For", tc.xff)
			}
			w := r.do(req)
			if want := "item 1 for " + tc.want; w.Code != 200 || w.Body.String() != want {
				t.Errorf("%d %q, want 200 %q", w.Code, w.Body, want)
			}
		})
	}
}

func TestNewEngineRefusesInvalidTrustedProxies(t *testing.T) {
	for _, proxies := range [][]string{{"not-an-address"}, {"10.0.0.0/33"}} {
		e, err := httpserver.NewEngine(httpserver.EngineOptions{Service: "test", Log: slog.New(slog.DiscardHandler),
			Registry: prometheus.NewRegistry(), Health: httpserver.NewHealth(nil), TrustedProxies: proxies})
		if err == nil || e != nil {
			t.Errorf("TrustedProxies %v: engine %v, error %v; want an error", proxies, e, err)
		}
	}
}
