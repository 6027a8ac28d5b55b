package events_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// A report survives the trip through the message and the wire: what the
// order-service builds is what the dispatcher reads.
func TestHealthRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 1, 250e6, time.UTC)
	h := queue.OrderHealth{
		QueueID: "sale", Source: "order-service-5d8f-a1b2c3d4", At: at, Interval: time.Second,
		Orders: 180, Created: 171, P95: 212 * time.Millisecond, Unavailable: 3, OutboxBacklog: 40,
	}
	m := events.HealthMessage(h)
	want := &v1.OrderHealth{
		EventId: "sale.health.order-service-5d8f-a1b2c3d4.1795770001250", OccurredAt: m.GetOccurredAt(),
		QueueId: "sale", Source: "order-service-5d8f-a1b2c3d4", IntervalMs: 1000,
		Orders: 180, Created: 171, P95Ms: 212, Unavailable: 3, OutboxBacklog: 40,
	}
	if !proto.Equal(m, want) || !m.GetOccurredAt().AsTime().Equal(at) || m.GetUserId() != "" {
		t.Fatalf("HealthMessage = %v, want %v at %v", m, want, at)
	}
	if key, err := events.RoutingKey(m); err != nil || key != "order.health" {
		t.Fatalf("RoutingKey = %q, %v", key, err)
	}
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := events.Decode(events.TypeName(m), body)
	if err != nil {
		t.Fatal(err)
	}
	got := events.HealthFrom(decoded.(*v1.OrderHealth))
	if !got.At.Equal(h.At) {
		t.Errorf("At = %v, want %v", got.At, h.At)
	}
	got.At = h.At
	if got != h {
		t.Errorf("HealthFrom = %+v, want %+v", got, h)
	}
}

func TestHealthFigures(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		p95   time.Duration
		p95ms int64
	}{
		{"no orders", 0, 0},
		// Rounded up: a report with orders never says 0.
		{"under a millisecond", 400 * time.Microsecond, 1},
		{"a millisecond and a bit", 1001 * time.Microsecond, 2},
		{"whole milliseconds", 95 * time.Millisecond, 95},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := events.HealthMessage(queue.OrderHealth{QueueID: "q", Source: "s", At: at, Interval: time.Second, P95: tc.p95})
			if m.GetP95Ms() != tc.p95ms {
				t.Errorf("p95_ms = %d, want %d", m.GetP95Ms(), tc.p95ms)
			}
			if got := events.HealthFrom(m).P95; got != time.Duration(tc.p95ms)*time.Millisecond {
				t.Errorf("HealthFrom P95 = %v, want %d ms", got, tc.p95ms)
			}
		})
	}
	// Counts the store never produces are clamped, not wrapped.
	m := events.HealthMessage(queue.OrderHealth{QueueID: "q", Source: "s", At: at, Orders: -1, OutboxBacklog: -5})
	if m.GetOrders() != 0 || m.GetOutboxBacklog() != 0 {
		t.Errorf("negative counts became %d and %d, want 0", m.GetOrders(), m.GetOutboxBacklog())
	}
	if h := events.HealthFrom(&v1.OrderHealth{Orders: 1 << 63}); h.Orders != 1<<63-1 {
		t.Errorf("orders 2^63 became %d, want the int64 maximum", h.Orders)
	}
	if h := events.HealthFrom(&v1.OrderHealth{QueueId: "q"}); !h.At.IsZero() || h.QueueID != "q" {
		t.Errorf("a message without occurred_at: %+v, want a zero At", h)
	}
}

// Two replicas reporting on one queue for the same second, and one replica
// on two queues or two seconds, give four event ids.
func TestHealthEventIDsAreDistinct(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	ids := map[string]bool{}
	for _, h := range []queue.OrderHealth{
		{QueueID: "sale", Source: "a", At: at},
		{QueueID: "sale", Source: "b", At: at},
		{QueueID: "sale-2", Source: "a", At: at},
		{QueueID: "sale", Source: "a", At: at.Add(time.Second)},
	} {
		ids[events.HealthMessage(h).GetEventId()] = true
	}
	if len(ids) != 4 {
		t.Fatalf("%d distinct event ids, want 4: %v", len(ids), ids)
	}
}
