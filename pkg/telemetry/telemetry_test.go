package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestEnabledFollowsTheStandardEnvironment: tracing is on only when an
// exporter is asked for, and OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none
// turn it off.
func TestEnabledFollowsTheStandardEnvironment(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"an OTLP endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"an exporter", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{"exporter none beats an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{"SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"SDK not disabled", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
				t.Setenv(k, c.env[k])
			}
			if got := Enabled(); got != c.want {
				t.Errorf("Enabled() = %v, want %v", got, c.want)
			}
		})
	}
}

// TestTraceContextRoundTrips: a span context written down (Context) and
// read back (Remote) is the same span; Sampled keeps only sampled ones;
// Link refuses what is not a traceparent.
func TestTraceContextRoundTrips(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := Remote(context.Background(), tp, "congo=t61rcWkgMzE")
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("Remote: %+v", sc)
	}
	if gotTP, gotTS := Context(ctx); gotTP != tp || gotTS != "congo=t61rcWkgMzE" {
		t.Errorf("Context = %q, %q; want %q and the tracestate back", gotTP, gotTS, tp)
	}
	if Sampled(ctx) != tp {
		t.Errorf("Sampled of a sampled span = %q", Sampled(ctx))
	}
	unsampled := Remote(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "")
	if Sampled(unsampled) != "" {
		t.Errorf("Sampled of an unsampled span = %q, want empty", Sampled(unsampled))
	}
	if tp, ts := Context(context.Background()); tp != "" || ts != "" {
		t.Errorf("Context without a span = %q, %q", tp, ts)
	}
	if Remote(context.Background(), "", "") != context.Background() {
		t.Error("Remote of nothing changed the context")
	}
	if l, ok := Link(tp); !ok || l.SpanContext.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("Link(%q) = %+v, %v", tp, l, ok)
	}
	for _, bad := range []string{"", "00-zz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if _, ok := Link(bad); ok {
			t.Errorf("Link(%q) accepted", bad)
		}
	}
}
