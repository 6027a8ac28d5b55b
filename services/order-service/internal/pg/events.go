package pg

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Encode turns a domain event into what the outbox stores and the broker
// carries: its waitingroom.v1 message marshalled, with the message's full
// name and routing key. The direct publisher encodes with it too, so an
// event sends the same bytes whichever way it leaves.
func Encode(e order.Event) (order.OutboxEvent, error) {
	var (
		msg proto.Message
		key string
	)
	ob := order.OutboxEvent{}
	switch e := e.(type) {
	case order.Created:
		o := e.Order
		msg, key, ob.OccurredAt = &waitingroomv1.OrderCreated{
			EventId: e.EventID(), OccurredAt: timestamppb.New(o.CreatedAt), QueueId: o.QueueID, UserId: o.UserID,
			OrderId: o.ID, TokenId: o.EntryTokenID, ProductId: o.ProductID, Quantity: int32(o.Quantity),
			Bypassed: o.Bypassed,
		}, events.RoutingKeyOrderCreated, o.CreatedAt
		ob.QueueID = o.QueueID
	case order.Failed:
		reason, ok := waitingroomv1.OrderFailureReason_value["ORDER_FAILURE_REASON_"+string(e.Reason)]
		if !ok {
			return order.OutboxEvent{}, fmt.Errorf("pg: encode %s: no OrderFailureReason for %q", e.EventID(), e.Reason)
		}
		msg, key, ob.OccurredAt = &waitingroomv1.OrderFailed{
			EventId: e.EventID(), OccurredAt: timestamppb.New(e.At), QueueId: e.QueueID, UserId: e.UserID,
			TokenId: e.TokenID, OrderId: e.OrderID, Reason: waitingroomv1.OrderFailureReason(reason),
			Restorable: e.Restorable, RemainingTtlMs: e.RemainingTTL.Milliseconds(),
		}, events.RoutingKeyOrderFailed, e.At
		ob.QueueID = e.QueueID
	case nil:
		return order.OutboxEvent{}, errors.New("pg: encode: no event")
	default:
		return order.OutboxEvent{}, fmt.Errorf("pg: encode: %T is not an order event", e)
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return order.OutboxEvent{}, fmt.Errorf("pg: encode %s: %w", e.EventID(), err)
	}
	ob.EventID, ob.Attempt, ob.RoutingKey, ob.Type, ob.Payload = e.EventID(), e.Attempt(), key, events.TypeName(msg), b
	return ob, nil
}
