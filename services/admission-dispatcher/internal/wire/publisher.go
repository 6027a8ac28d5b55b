package wire

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
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
		e, n := batch[i], 1
		var msg proto.Message
		var id, key string
		var err error
		if p.batch && e.Type == queue.EventTokenIssued {
			for i+n < len(batch) && n < maxTokensPerMessage && batch[i+n].Type == queue.EventTokenIssued && batch[i+n].QueueID == e.QueueID {
				n++
			}
			var m *waitingroomv1.TokensIssued
			m, key, err = events.TokensIssuedFromOutbox(batch[i : i+n])
			msg, id = m, m.GetEventId()
		} else {
			msg, key, err = events.FromOutbox(e)
			id = e.ID
		}
		if err != nil {
			// A malformed entry would block the outbox forever; it cannot
			// come from our scripts, so this is a bug worth stopping for.
			return fmt.Errorf("outbox entry %s: %w", e.StreamID, err)
		}
		out = append(out, broker.Event{ID: id, RoutingKey: key, Time: e.OccurredAt, Message: msg,
			TraceParent: e.TraceParent, TraceState: e.TraceState})
		i += n
	}
	return p.pub.Publish(ctx, out...)
}
