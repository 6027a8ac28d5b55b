package wire

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// publisher sends outbox events through the broker with confirms.
type publisher struct{ pub *broker.Publisher }

func (p publisher) PublishEvents(ctx context.Context, evs []order.OutboxEvent) error {
	out := make([]broker.Event, 0, len(evs))
	for _, e := range evs {
		msg, err := events.Decode(e.Type, e.Payload)
		if err != nil {
			return fmt.Errorf("outbox event %s: %w", e.EventID, err)
		}
		out = append(out, broker.Event{ID: e.EventID, RoutingKey: e.RoutingKey, Time: e.OccurredAt, Message: msg,
			TraceParent: e.TraceParent, TraceState: e.TraceState})
	}
	return p.pub.Publish(ctx, out...)
}

// PublishEvent publishes one domain event as the outbox would have stored
// it (pg.Encode): the fallback when the outbox is what failed.
func (p publisher) PublishEvent(ctx context.Context, e order.Event) error {
	ob, err := pg.Encode(e)
	if err != nil {
		return err
	}
	return p.PublishEvents(ctx, []order.OutboxEvent{ob})
}

// healthPublisher publishes health reports straight to the broker, on a
// channel of their own so they never wait behind an outbox batch; a
// report is not stored anywhere else.
type healthPublisher struct{ pub *broker.Publisher }

func (p healthPublisher) PublishHealth(ctx context.Context, reports []queue.OrderHealth) error {
	out := make([]broker.Event, len(reports))
	for i, h := range reports {
		m := events.HealthMessage(h)
		out[i] = broker.Event{ID: m.GetEventId(), RoutingKey: events.RoutingKeyOrderHealth, Time: h.At, Message: m}
	}
	return p.pub.Publish(ctx, out...)
}
