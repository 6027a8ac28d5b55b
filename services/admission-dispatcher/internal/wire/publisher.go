package wire

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// eventPublisher turns outbox entries into protobuf events and publishes
// them with confirms.
type eventPublisher struct {
	pub *broker.Publisher
}

func (p eventPublisher) Publish(ctx context.Context, batch []queue.Event) error {
	out := make([]broker.Event, 0, len(batch))
	for _, e := range batch {
		msg, key, err := events.FromOutbox(e)
		if err != nil {
			// A malformed entry would block the outbox forever; it cannot
			// come from our scripts, so this is a bug worth stopping for.
			return fmt.Errorf("outbox entry %s: %w", e.StreamID, err)
		}
		out = append(out, broker.Event{ID: e.ID, RoutingKey: key, Time: e.OccurredAt, Message: msg,
			TraceParent: e.TraceParent, TraceState: e.TraceState})
	}
	return p.pub.Publish(ctx, out...)
}
