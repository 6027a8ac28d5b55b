package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/problem"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// positionRoute is the position poll's route, as the engine names it in the
// request metrics.
const positionRoute = "/api/v1/queues/:queueId/position"

// fastPolls serves the gateway's most frequent request, a poll with a
// ticket whose place the admission frontier can tell, in front of the gin
// engine: the same answer (the view, Cache-Control, Retry-After) and the
// same metrics, without the engine's context, middleware chain and router,
// which were a third of such a poll's CPU. Anything else, and any poll it
// cannot answer that way (no ticket, a bad token or ticket, near the front,
// a browser's cross-origin request), goes to the engine, which answers it
// as before; nothing has been written or counted by then.
type fastPolls struct {
	next     http.Handler
	svc      *app.Service
	ver      *auth.Verifier
	log      *slog.Logger
	duration *prometheus.HistogramVec
	// ok is the series of its answers (200), looked up once.
	ok prometheus.Observer
	// traced: tracing is on, and a poll answered here gets the server span
	// the engine's instrumentation gives the polls it answers.
	traced bool
}

func newFastPolls(next http.Handler, svc *app.Service, ver *auth.Verifier, log *slog.Logger, duration *prometheus.HistogramVec) *fastPolls {
	return &fastPolls{next: next, svc: svc, ver: ver, log: log, duration: duration,
		ok: duration.WithLabelValues("queue-gateway", positionRoute, http.MethodGet, "200"), traced: telemetry.Enabled()}
}

var tracer = telemetry.Tracer("services/queue-gateway")

// span starts the server span of a poll answered here, named and
// attributed as otelgin names the engine's, a child of the caller's
// traceparent if it sent one.
func (f *fastPolls) span(r *http.Request) trace.Span {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	_, span := tracer.Start(ctx, http.MethodGet+" "+positionRoute, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", http.MethodGet), attribute.String("http.route", positionRoute),
		attribute.String("url.path", r.URL.Path), attribute.Int("http.response.status_code", http.StatusOK),
		attribute.Bool("waitingroom.fast_path", true)))
	return span
}

// The answer's constant header values, shared (net/http only reads them).
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noStore         = []string{"no-store"}
)

// retryAfters are the Retry-After header values of 1 to 120 seconds
// (every poll's answer has one), made once.
var retryAfters = func() map[string][]string {
	m := make(map[string][]string, 120)
	for s := 1; s <= 120; s++ {
		v := strconv.Itoa(s)
		m[v] = []string{v}
	}
	return m
}()

func retryAfterValue(v string) []string {
	if vs, ok := retryAfters[v]; ok {
		return vs
	}
	return []string{v}
}

// bodies are the answers' buffers, reused.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Unwrap is the engine behind the fast path (its routes are the API's).
func (f *fastPolls) Unwrap() http.Handler { return f.next }

func (f *fastPolls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, tk, ok := positionPoll(r)
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	p, err := f.ver.Verify(auth.Bearer(r.Header.Get("Authorization")))
	if err != nil {
		f.next.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	defer func() {
		// What the engine's recovery does for its routes: a 500, logged.
		if e := recover(); e != nil {
			f.log.Error("panic in the position fast path", "path", r.URL.Path, "panic", e)
			problem.Write(w, r, problem.New(http.StatusInternalServerError, problem.TypeInternal, "internal error"))
			f.duration.WithLabelValues("queue-gateway", positionRoute, http.MethodGet, "500").Observe(time.Since(start).Seconds())
		}
	}()
	st, ok := f.svc.PositionFromFrontier(q, p.UserID, tk)
	if !ok {
		f.next.ServeHTTP(w, r)
		return
	}
	if f.traced {
		defer f.span(r).End()
	}
	buf := bodies.Get().(*[]byte)
	body, retryAfter := standingBody(st, (*buf)[:0])
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Cache-Control"] = noStore
	h["Retry-After"] = retryAfterValue(retryAfter)
	// No Content-Length: net/http sets it, the body being written whole
	// before the handler returns.
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
		f.log.Debug("position poll: client gone", "queue", q, "err", err)
	}
	*buf = body
	bodies.Put(buf)
	f.ok.Observe(time.Since(start).Seconds())
}

// positionPoll reports whether r is a GET of /api/v1/queues/{q}/position
// with a ticket and without an Origin (a cross-origin request takes the
// engine's CORS handling), and its queue id and ticket.
func positionPoll(r *http.Request) (q, ticket string, ok bool) {
	const prefix, suffix = "/api/v1/queues/", "/position"
	path := r.URL.Path
	if r.Method != http.MethodGet || !strings.HasPrefix(path, prefix) || !strings.HasSuffix(path, suffix) ||
		r.URL.RawPath != "" || r.Header.Get("Origin") != "" {
		return "", "", false
	}
	ticket = r.Header.Get(ticketHeader)
	q = path[len(prefix) : len(path)-len(suffix)]
	return q, ticket, ticket != "" && queue.ValidID(q)
}
