package wire

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Token event forms (TOKEN_EVENTS): one TokenIssued message a person, or
// one TokensIssued message for a queue's admissions of a relay round.
const (
	TokenEventsEach  = "each"
	TokenEventsBatch = "batch"
)

// maxTokensPerMessage bounds a TokensIssued: at about 120 bytes a token,
// half a megabyte, well under what a broker or a consumer takes in one
// message.
const maxTokensPerMessage = 4096

// eventPublisher turns outbox entries into protobuf events and publishes
// them with confirms. With batch, the TokenIssued entries of one queue that
// follow each other become one TokensIssued (in their order, at most
// maxTokensPerMessage a message); every other entry is its own message.
type eventPublisher struct {
	pub   *broker.Publisher
	batch bool
}

func (p eventPublisher) Publish(ctx context.Context, batch []queue.Event) error {
	out := make([]broker.Event, 0, len(batch))
	for i := 0; i < len(batch); {
		e := batch[i]
		if p.batch && e.Type == queue.EventTokenIssued {
			j := i + 1
			for j < len(batch) && j-i < maxTokensPerMessage && batch[j].Type == queue.EventTokenIssued && batch[j].QueueID == e.QueueID {
				j++
			}
			msg, key, err := events.TokensIssuedFromOutbox(batch[i:j])
			if err != nil {
				return fmt.Errorf("outbox entry %s: %w", e.StreamID, err)
			}
			out = append(out, broker.Event{ID: msg.GetEventId(), RoutingKey: key, Time: e.OccurredAt, Message: msg,
				TraceParent: e.TraceParent, TraceState: e.TraceState})
			i = j
			continue
		}
		msg, key, err := events.FromOutbox(e)
		if err != nil {
			// A malformed entry would block the outbox forever; it cannot
			// come from our scripts, so this is a bug worth stopping for.
			return fmt.Errorf("outbox entry %s: %w", e.StreamID, err)
		}
		out = append(out, broker.Event{ID: e.ID, RoutingKey: key, Time: e.OccurredAt, Message: msg,
			TraceParent: e.TraceParent, TraceState: e.TraceState})
		i++
	}
	return p.pub.Publish(ctx, out...)
}
