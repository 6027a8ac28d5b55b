package httpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

// TestRequestDurationsCarryTheTraceAsExemplar: a request inside a sampled
// span is observed with its trace id as the bucket's exemplar, which the
// metrics endpoint serves in the OpenMetrics format; an unsampled one adds
// no exemplar.
func TestRequestDurationsCarryTheTraceAsExemplar(t *testing.T) {
	// Tracing on (a console exporter named; nothing is exported here): the
	// engine looks for exemplars only then.
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	reg := prometheus.NewRegistry()
	e, err := httpserver.NewEngine(httpserver.EngineOptions{Service: "test", Log: slog.New(slog.DiscardHandler),
		Registry: reg, Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	e.GET("/sampled", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	e.GET("/unsampled", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	for path, flags := range map[string]trace.TraceFlags{"/sampled": trace.FlagsSampled, "/unsampled": 0} {
		ctx := trace.ContextWithSpanContext(context.Background(),
			trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags}))
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		e.ServeHTTP(httptest.NewRecorder(), req)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exemplars := map[string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "waitingroom_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var route string
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					route = l.GetValue()
				}
			}
			for _, b := range m.GetHistogram().GetBucket() {
				if ex := b.GetExemplar(); ex != nil {
					for _, l := range ex.GetLabel() {
						if l.GetName() == "trace_id" && l.GetValue() == tid.String() {
							exemplars[route]++
						}
					}
				}
			}
		}
	}
	if exemplars["/sampled"] != 1 || exemplars["/unsampled"] != 0 {
		t.Fatalf("exemplars by route %v, want one on /sampled and none on /unsampled", exemplars)
	}

	// The ops listener serves it as OpenMetrics when asked for, exemplar
	// included, and as the text format otherwise.
	ops, err := httpserver.NewOps("127.0.0.1:0", httpserver.OpsOptions{Registry: reg, Health: httpserver.NewHealth(nil),
		Log: slog.New(slog.DiscardHandler), Timeouts: defaultTimeouts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	for accept, want := range map[string]bool{"application/openmetrics-text; version=1.0.0": true, "text/plain": false} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ops.Addr()+"/metrics", nil)
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if got := strings.Contains(string(b), `# {trace_id="`+tid.String()+`"}`); got != want {
			t.Errorf("Accept %s: exemplar in the exposition %v, want %v", accept, got, want)
		}
	}
}
