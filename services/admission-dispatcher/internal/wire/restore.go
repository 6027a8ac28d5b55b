package wire

import (
	"context"
	"log/slog"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
)

// orderFailedConsumer decodes OrderFailed deliveries for the restore
// handler and turns its result into the broker's: what is not an
// OrderFailed, or cannot be decoded, is dead-lettered here.
func orderFailedConsumer(h *restore.Handler, log *slog.Logger) func(context.Context, broker.Delivery) broker.Result {
	return func(ctx context.Context, d broker.Delivery) broker.Result {
		var ev waitingroomv1.OrderFailed
		if d.Type != "" && d.Type != events.TypeName(&ev) {
			log.Error("unexpected message type on the order-failed queue: dead-lettered", "type", d.Type, "message_id", d.MessageID)
			return broker.DeadLetter
		}
		if err := proto.Unmarshal(d.Body, &ev); err != nil {
			log.Error("undecodable OrderFailed: dead-lettered", "message_id", d.MessageID, "err", err)
			return broker.DeadLetter
		}
		switch h.Handle(ctx, restore.Failure{
			QueueID: ev.GetQueueId(), UserID: ev.GetUserId(), TokenID: ev.GetTokenId(), OrderID: ev.GetOrderId(),
			Reason: ev.GetReason().String(), Restorable: ev.GetRestorable(), Redelivery: d.DeliveryCount,
		}) {
		case restore.Done:
			return broker.Ack
		case restore.Poison:
			return broker.DeadLetter
		}
		return broker.Retry
	}
}
