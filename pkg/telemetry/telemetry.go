// Package telemetry turns OpenTelemetry tracing on from the standard OTEL_*
// environment and carries W3C trace context across the places where no
// library instruments it: AMQP headers, the order-service's outbox rows and
// the queues' Redis outbox streams, so a trace continues on the far side of
// the broker even when the broker was down in between.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER (other than
// "none") is set, and OTEL_SDK_DISABLED is not "true". While it is off no
// instrumentation is installed at all (Enabled decides), so the hot paths
// pay nothing; trace context already in a message is still passed on. The
// SDK and the exporters are set up by the process shell (service.Run), so
// the domain packages that start spans depend on the OpenTelemetry API
// only.
//
// Every service reads the standard variables the same way, through the
// SDK itself: OTEL_EXPORTER_OTLP_PROTOCOL, http/protobuf (the default) or
// grpc; OTEL_TRACES_SAMPLER (default parentbased_always_on) and
// OTEL_TRACES_SAMPLER_ARG; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// (service.name defaults to the service's name); OTEL_BSP_* for the batch
// exporter. See docs/DESIGN.md "Tracing".
package telemetry

import (
	"context"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the environment asks for traces: an OTLP endpoint
// or an explicit OTEL_TRACES_EXPORTER other than "none", and the SDK not
// disabled. Every instrumentation point asks it before installing itself.
func Enabled() bool {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp != "" {
		return !strings.EqualFold(exp, "none")
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracer is the tracer of one of our packages, from the global provider
// (a no-op one while tracing is off).
func Tracer(pkg string) trace.Tracer {
	return otel.Tracer("github.com/waitingroom/waitingroom/" + pkg)
}

// Context is what of ctx's span context travels with a message: its W3C
// traceparent and tracestate, or "" for both when ctx carries none.
func Context(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"], c["tracestate"]
}

// Sampled is ctx's traceparent when its span is sampled, else "": what is
// worth keeping next to a person in Redis so that their admission can link
// to it.
func Sampled(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	tp, _ := Context(ctx)
	return tp
}

// Remote returns ctx carrying the span context in traceparent and
// tracestate as its remote parent; ctx as it is when traceparent is empty
// or malformed.
func Remote(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// Link is a span link to the span in traceparent; ok is false when it
// names no valid span.
func Link(traceparent string) (l trace.Link, ok bool) {
	sc := trace.SpanContextFromContext(Remote(context.Background(), traceparent, ""))
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}
