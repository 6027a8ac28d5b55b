// Package restore gives tokens back when orders fail: it consumes
// OrderFailed from the admission-dispatcher.order-failed quorum queue and
// restores the token (restorable) or frees the slot (not restorable).
package restore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Store restores tokens. redisstore.Store implements it.
type Store interface {
	Restore(ctx context.Context, q, user, tokenID, orderID string, restorable bool) (queue.RestoreOutcome, error)
}

// Recorder counts outcomes; dispatch.Metrics implements it.
type Recorder interface {
	Restored(q string, o queue.RestoreOutcome)
}

// Handler handles OrderFailed deliveries.
type Handler struct {
	store Store
	rec   Recorder
	log   *slog.Logger
	// unavailableFor is how long a delivery is held, retrying, while Redis
	// is down, before it goes back to the queue: an outage should delay
	// restores, not burn through the delivery limit into the DLQ.
	unavailableFor time.Duration
}

// NewHandler returns a Handler.
func NewHandler(store Store, rec Recorder, log *slog.Logger) *Handler {
	return &Handler{store: store, rec: rec, log: log, unavailableFor: 30 * time.Second}
}

// Handle restores the token of one OrderFailed. Redelivery is normal: the
// restore is idempotent by token and order id.
func (h *Handler) Handle(ctx context.Context, d broker.Delivery) broker.Result {
	var ev waitingroomv1.OrderFailed
	if d.Type != "" && d.Type != events.TypeName(&ev) {
		h.log.Error("unexpected message type on the order-failed queue: dead-lettered", "type", d.Type, "message_id", d.MessageID)
		return broker.DeadLetter
	}
	if err := proto.Unmarshal(d.Body, &ev); err != nil {
		h.log.Error("undecodable OrderFailed: dead-lettered", "message_id", d.MessageID, "err", err)
		return broker.DeadLetter
	}
	if !queue.ValidID(ev.GetQueueId()) || !queue.ValidUserID(ev.GetUserId()) || ev.GetTokenId() == "" || ev.GetOrderId() == "" {
		h.log.Error("OrderFailed without valid queue, user, token and order ids: dead-lettered", "message_id", d.MessageID)
		return broker.DeadLetter
	}
	deadline := time.Now().Add(h.unavailableFor)
	pause := 100 * time.Millisecond
	for {
		out, err := h.store.Restore(ctx, ev.GetQueueId(), ev.GetUserId(), ev.GetTokenId(), ev.GetOrderId(), ev.GetRestorable())
		if err == nil {
			h.rec.Restored(ev.GetQueueId(), out)
			h.log.Info("order failure handled", "queue", ev.GetQueueId(), "token", ev.GetTokenId(), "order", ev.GetOrderId(),
				"reason", ev.GetReason().String(), "restorable", ev.GetRestorable(), "outcome", out, "redelivery", d.DeliveryCount)
			return broker.Ack
		}
		if !errors.Is(err, queue.ErrUnavailable) || time.Now().After(deadline) {
			h.log.Warn("restore failed: will be redelivered", "token", ev.GetTokenId(), "err", err)
			return broker.Retry
		}
		select {
		case <-ctx.Done():
			return broker.Retry
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}
