package wire

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
)

// queueChanges is the queue the replicas share to store the queues'
// records: the operators' changes (QueueChanged) and the lines' minutes
// (QueueMinute); each event reaches one of them. A poison message goes to
// its dead-letter queue, to be looked at, not lost.
func queueChanges(name string) broker.QueueSpec {
	return broker.QueueSpec{Name: name, Bindings: []string{events.RoutingKeyQueueChanged, events.RoutingKeyQueueMinute}, Quorum: true,
		DeliveryLimit: 50, DeadLetter: true, Prefetch: 16}
}

// recordChange stores a QueueChanged in the audit trail and a QueueMinute
// in the history. While PostgreSQL is down the event goes back to the
// queue a second later (the delivery limit of 50 covers about a minute;
// past it, the dead-letter queue keeps it); a redelivered one is stored
// once.
func recordChange(trail *audit.Service, hist *history.Service, log *slog.Logger) func(context.Context, broker.Delivery) broker.Result {
	changed := events.TypeName(&waitingroomv1.QueueChanged{})
	minute := events.TypeName(&waitingroomv1.QueueMinute{})
	return func(ctx context.Context, d broker.Delivery) broker.Result {
		var err error
		switch d.Type {
		case changed:
			var e waitingroomv1.QueueChanged
			if proto.Unmarshal(d.Body, &e) != nil {
				return broker.DeadLetter
			}
			_, err = trail.Record(ctx, &e)
		case minute:
			var e waitingroomv1.QueueMinute
			if proto.Unmarshal(d.Body, &e) != nil {
				return broker.DeadLetter
			}
			_, err = hist.Record(ctx, &e)
		default:
			return broker.Ack
		}
		if err == nil {
			return broker.Ack
		}
		if errors.Is(err, audit.ErrInvalidEvent) || errors.Is(err, history.ErrInvalidEvent) {
			log.Warn("a "+d.Type+" that cannot be recorded goes to the dead-letter queue", "err", err)
			return broker.DeadLetter
		}
		log.Info("a queue record not stored yet; tried again", "type", d.Type, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return broker.Retry
	}
}
