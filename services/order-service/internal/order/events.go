package order

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// Event ids are derived from what they report, so recording the same fact
// twice (the handler and the reaper, two reapers) yields one event.

func orderCreated(o Order) (OutboxEvent, error) {
	msg := &waitingroomv1.OrderCreated{
		EventId: o.ID + ".created", OccurredAt: timestamppb.New(o.CreatedAt), QueueId: o.QueueID, UserId: o.UserID,
		OrderId: o.ID, TokenId: o.EntryTokenID, ProductId: o.ProductID, Quantity: int32(o.Quantity),
	}
	return outbox(msg.GetEventId(), events.RoutingKeyOrderCreated, o.CreatedAt, msg)
}

func orderFailed(q, user, tokenID, orderID string, reason waitingroomv1.OrderFailureReason, restorable bool, expires time.Time) (OutboxEvent, error) {
	now := time.Now().UTC()
	remaining := max(expires.Sub(now), 0)
	msg := &waitingroomv1.OrderFailed{
		EventId: tokenID + ".failed." + orderID, OccurredAt: timestamppb.New(now), QueueId: q, UserId: user,
		TokenId: tokenID, OrderId: orderID, Reason: reason, Restorable: restorable, RemainingTtlMs: remaining.Milliseconds(),
	}
	return outbox(msg.GetEventId(), events.RoutingKeyOrderFailed, now, msg)
}

func outbox(id, key string, at time.Time, msg proto.Message) (OutboxEvent, error) {
	b, err := proto.Marshal(msg)
	if err != nil {
		return OutboxEvent{}, err
	}
	return OutboxEvent{EventID: id, RoutingKey: key, Type: events.TypeName(msg), Payload: b, OccurredAt: at}, nil
}
