package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

// seen is what the handler saw of one delivery: the span context of its
// ctx and the trace headers.
type seen struct {
	sc                      trace.SpanContext
	traceparent, cetp, cets string
}

// TestTraceContextCrossesTheBroker: with a recording tracer provider, each
// published event gets a producer span and carries its context in both
// header pairs (traceparent / tracestate and the CloudEvents extension);
// the consumer's span is a child of that producer span, and the handler's
// ctx is inside it. The producer span continues the event's own trace
// (Event.TraceParent, from an outbox) over the caller's; a message from
// another producer with only the CloudEvents pair is continued too.
//
// Not parallel: it replaces the global tracer provider while it runs
// (parallel tests start after it and see the no-op one again).
func TestTraceContextCrossesTheBroker(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	// Back to a no-op provider, not the one there was: the global default
	// forwards to the first provider ever set, this one.
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	e := newEnv(t)
	c := e.conn(e.url)
	var mu sync.Mutex
	got := map[string]seen{}
	e.consume(c, broker.QueueSpec{Name: e.queue("traced"), Bindings: []string{"tr.#"}, Quorum: true}, func(ctx context.Context, d broker.Delivery) broker.Result {
		h := func(k string) string { s, _ := d.Headers[k].(string); return s }
		mu.Lock()
		got[d.MessageID] = seen{sc: trace.SpanContextFromContext(ctx), traceparent: h("traceparent"),
			cetp: h("cloudEvents:traceparent"), cets: h("cloudEvents:tracestate")}
		mu.Unlock()
		return broker.Ack
	})
	pub := c.Publisher()
	ctx := context.Background()
	// A confirm comes for an unroutable message too: the queue is bound
	// once a probe is delivered, not once one is confirmed.
	waitFor(t, 30*time.Second, "the queue bound (a probe delivered)", func() bool {
		_ = pub.Publish(ctx, event("probe-1", "tr.probe", time.Now()))
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		_, ok := got["probe-1"]
		return ok
	})

	// 1. An event written down in a trace (an outbox row): its trace wins
	// over the caller's.
	caller, callerSpan := otel.Tracer("test").Start(ctx, "caller")
	outboxTP := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ev1 := event("ev-outbox", "tr.one", time.Now())
	ev1.TraceParent, ev1.TraceState = outboxTP, "vendor=abc"
	// 2. An event of the caller's trace.
	ev2 := event("ev-caller", "tr.two", time.Now())
	if err := pub.Publish(caller, ev1, ev2); err != nil {
		t.Fatal(err)
	}
	callerSpan.End()
	// 3. Another producer's message with only the CloudEvents pair.
	ceTP := "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
	e.try(func(ch *amqp.Channel) error {
		return ch.Publish(e.exchange, "tr.three", false, false, amqp.Publishing{MessageId: "ev-ce",
			Headers: amqp.Table{"cloudEvents:traceparent": ceTP}})
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		done := got["ev-outbox"].sc.IsValid() && got["ev-caller"].sc.IsValid() && got["ev-ce"].sc.IsValid()
		state := fmt.Sprintf("%+v", got)
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 10s waiting for three traced deliveries; delivered: %s", state)
		}
		time.Sleep(20 * time.Millisecond)
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	waitFor(t, 5*time.Second, "the consumer spans ended", func() bool {
		for _, s := range rec.Ended() {
			spans[s.Name()+" "+s.SpanContext().TraceID().String()] = s
		}
		return len(spans) >= 7 // probe: 2, ev1: 2, ev2: 2, ev-ce: 1
	})
	span := func(name, traceID string) sdktrace.ReadOnlySpan {
		s, ok := spans[name+" "+traceID]
		if !ok {
			t.Fatalf("no span %q in trace %s; have %v", name, traceID, keys(spans))
		}
		return s
	}
	mu.Lock()
	defer mu.Unlock()

	// 1: producer span under the outbox's span, consumer span under it.
	p1 := span("publish tr.one", "0af7651916cd43dd8448eb211c80319c")
	if p1.Parent().SpanID().String() != "b7ad6b7169203331" || p1.SpanKind() != trace.SpanKindProducer {
		t.Errorf("publish tr.one: parent %s kind %s, want the outbox's span b7ad6b7169203331, producer", p1.Parent().SpanID(), p1.SpanKind())
	}
	c1 := span("process tr.one", "0af7651916cd43dd8448eb211c80319c")
	if c1.Parent().SpanID() != p1.SpanContext().SpanID() || c1.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("process tr.one: parent %s, want the publish span %s", c1.Parent().SpanID(), p1.SpanContext().SpanID())
	}
	g1 := got["ev-outbox"]
	wantTP := "00-0af7651916cd43dd8448eb211c80319c-" + p1.SpanContext().SpanID().String() + "-01"
	if g1.traceparent != wantTP || g1.cetp != wantTP || g1.cets != "vendor=abc" || g1.sc.SpanID() != c1.SpanContext().SpanID() {
		t.Errorf("ev-outbox delivery: traceparent %q, CE %q / %q, handler span %s; want %q twice, vendor=abc, span %s",
			g1.traceparent, g1.cetp, g1.cets, g1.sc.SpanID(), wantTP, c1.SpanContext().SpanID())
	}

	// 2: under the caller's span.
	tid := callerSpan.SpanContext().TraceID().String()
	p2 := span("publish tr.two", tid)
	if p2.Parent().SpanID() != callerSpan.SpanContext().SpanID() {
		t.Errorf("publish tr.two: parent %s, want the caller's span %s", p2.Parent().SpanID(), callerSpan.SpanContext().SpanID())
	}
	if c2 := span("process tr.two", tid); c2.Parent().SpanID() != p2.SpanContext().SpanID() || got["ev-caller"].sc.TraceID().String() != tid {
		t.Errorf("process tr.two: parent %s, handler trace %s; want %s, %s", c2.Parent().SpanID(), got["ev-caller"].sc.TraceID(), p2.SpanContext().SpanID(), tid)
	}

	// 3: the CloudEvents pair alone is continued.
	if c3 := span("process tr.three", "1bf7651916cd43dd8448eb211c80319c"); c3.Parent().SpanID().String() != "c7ad6b7169203331" {
		t.Errorf("process tr.three: parent %s, want c7ad6b7169203331 from cloudEvents:traceparent", c3.Parent().SpanID())
	}

}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
