package broker

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// The W3C trace context travels in two pairs of headers: the plain
// traceparent / tracestate most AMQP instrumentations read, and the
// CloudEvents distributed-tracing extension in the AMQP binding's
// cloudEvents: prefix. Both pairs carry the same values.
const (
	headerTraceParent   = "traceparent"
	headerTraceState    = "tracestate"
	headerCETraceParent = "cloudEvents:traceparent"
	headerCETraceState  = "cloudEvents:tracestate"
)

// tracer is looked up at each use, not kept: the global provider may be
// replaced (tests do), and a tracer kept from before would stay with the
// first one.
func tracer() trace.Tracer { return telemetry.Tracer("pkg/broker") }

// startPublish starts the producer span of one event: a child of the trace
// the event carries (Event.TraceParent: the order's, kept in the outbox), or
// else of ctx's. It writes the span's context into the headers, so the
// consumer continues this trace.
func (c *Conn) startPublish(ctx context.Context, e Event, h amqp.Table) trace.Span {
	if e.TraceParent != "" {
		ctx = telemetry.Remote(ctx, e.TraceParent, e.TraceState)
	}
	ctx, span := tracer().Start(ctx, "publish "+e.RoutingKey, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(messaging("send", c.o.Exchange, e.RoutingKey, e.ID)...))
	if tp, ts := telemetry.Context(ctx); tp != "" {
		h[headerTraceParent], h[headerCETraceParent] = tp, tp
		if ts != "" {
			h[headerTraceState], h[headerCETraceState] = ts, ts
		}
	}
	return span
}

// endPublish ends an event's producer span with its outcome.
func endPublish(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startProcess starts the consumer span of one delivery, a child of the
// producer span named in its headers (the CloudEvents pair when the plain
// one is missing).
func (c *Conn) startProcess(ctx context.Context, d amqp.Delivery) (context.Context, trace.Span) {
	tp, ts := str(d.Headers[headerTraceParent]), str(d.Headers[headerTraceState])
	if tp == "" {
		tp, ts = str(d.Headers[headerCETraceParent]), str(d.Headers[headerCETraceState])
	}
	ctx = telemetry.Remote(ctx, tp, ts)
	return tracer().Start(ctx, "process "+d.RoutingKey, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(messaging("process", d.Exchange, d.RoutingKey, d.MessageId)...))
}

// endProcess ends a delivery's consumer span with the handler's verdict.
func endProcess(span trace.Span, r Result) {
	verdict := "requeue"
	switch r {
	case Ack:
		verdict = "ack"
	case DeadLetter:
		verdict = "dead-letter"
	}
	span.SetAttributes(attribute.String("messaging.rabbitmq.settlement", verdict))
	if r != Ack {
		span.SetStatus(codes.Error, verdict)
	}
	span.End()
}

// messaging is the OpenTelemetry messaging attributes of one message.
func messaging(op, exchange, key, id string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "rabbitmq"),
		attribute.String("messaging.operation.type", op),
		attribute.String("messaging.destination.name", exchange),
		attribute.String("messaging.rabbitmq.destination.routing_key", key),
		attribute.String("messaging.message.id", id),
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
