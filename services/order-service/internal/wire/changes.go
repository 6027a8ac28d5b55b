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
)

// queueChanges is the queue the replicas share to store the operators'
// changes: each QueueChanged reaches one of them. A poison message goes to
// its dead-letter queue, to be looked at, not lost.
func queueChanges(name string) broker.QueueSpec {
	return broker.QueueSpec{Name: name, Bindings: []string{events.RoutingKeyQueueChanged}, Quorum: true,
		DeliveryLimit: 50, DeadLetter: true, Prefetch: 16}
}

// recordChange stores a QueueChanged in the audit trail. While PostgreSQL
// is down the event goes back to the queue a second later (the delivery
// limit of 50 covers about a minute; past it, the dead-letter queue keeps
// it); a redelivered one is stored once.
func recordChange(trail *audit.Service, log *slog.Logger) func(context.Context, broker.Delivery) broker.Result {
	changed := events.TypeName(&waitingroomv1.QueueChanged{})
	return func(ctx context.Context, d broker.Delivery) broker.Result {
		if d.Type != changed {
			return broker.Ack
		}
		var e waitingroomv1.QueueChanged
		if proto.Unmarshal(d.Body, &e) != nil {
			return broker.DeadLetter
		}
		if _, err := trail.Record(ctx, &e); err != nil {
			if errors.Is(err, audit.ErrInvalidEvent) {
				log.Warn("a QueueChanged that cannot be recorded goes to the dead-letter queue", "err", err)
				return broker.DeadLetter
			}
			log.Info("a queue change not stored yet; tried again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			return broker.Retry
		}
		return broker.Ack
	}
}
