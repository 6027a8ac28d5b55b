package events

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// FromOutbox turns an entry of a queue's Redis outbox into its protobuf
// event and routing key.
func FromOutbox(e queue.Event) (proto.Message, string, error) {
	switch e.Type {
	case queue.EventTokenIssued:
		return &waitingroomv1.TokenIssued{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
			TokenId: e.TokenID, ActivateAt: ts(e.ActivateAt), ExpiresAt: ts(e.ExpiresAt), Sequence: uint64(max(e.Seq, 0)),
		}, RoutingKeyTokenIssued, nil
	case queue.EventTokenRestored:
		return &waitingroomv1.TokenRestored{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
			TokenId: e.TokenID, ExpiresAt: ts(e.ExpiresAt), OrderId: e.OrderID, RemainingTtlMs: e.RemainingTTL.Milliseconds(),
		}, RoutingKeyTokenRestored, nil
	case queue.EventTokenExpired:
		reason := waitingroomv1.TokenExpiredReason_TOKEN_EXPIRED_REASON_UNSPECIFIED
		if v, ok := waitingroomv1.TokenExpiredReason_value["TOKEN_EXPIRED_REASON_"+e.Reason]; ok {
			reason = waitingroomv1.TokenExpiredReason(v)
		}
		return &waitingroomv1.TokenExpired{
			EventId: e.ID, OccurredAt: ts(e.OccurredAt), QueueId: e.QueueID, UserId: e.UserID,
			TokenId: e.TokenID, Reason: reason,
		}, RoutingKeyTokenExpired, nil
	}
	return nil, "", fmt.Errorf("%w: outbox entry of type %q", ErrUnknownType, e.Type)
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
