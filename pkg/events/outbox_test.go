package events

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

func TestFromOutbox(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000).UTC()
	tests := []struct {
		in   queue.Event
		key  string
		want proto.Message
	}{
		{
			queue.Event{Type: "TokenIssued", ID: "t1.issued", QueueID: "q", UserID: "u", TokenID: "t1", Seq: 7,
				ActivateAt: at.Add(time.Second), ExpiresAt: at.Add(time.Minute), OccurredAt: at},
			RoutingKeyTokenIssued,
			&waitingroomv1.TokenIssued{EventId: "t1.issued", OccurredAt: ts(at), QueueId: "q", UserId: "u", TokenId: "t1",
				ActivateAt: ts(at.Add(time.Second)), ExpiresAt: ts(at.Add(time.Minute)), Sequence: 7},
		},
		{
			queue.Event{Type: "TokenRestored", ID: "t1.restored.o1", QueueID: "q", UserID: "u", TokenID: "t1", OrderID: "o1",
				ExpiresAt: at.Add(time.Minute), RemainingTTL: 42 * time.Second, OccurredAt: at},
			RoutingKeyTokenRestored,
			&waitingroomv1.TokenRestored{EventId: "t1.restored.o1", OccurredAt: ts(at), QueueId: "q", UserId: "u", TokenId: "t1",
				ExpiresAt: ts(at.Add(time.Minute)), OrderId: "o1", RemainingTtlMs: 42_000},
		},
		{
			queue.Event{Type: "TokenExpired", ID: "t1.expired", QueueID: "q", UserID: "u", TokenID: "t1", Reason: "NO_SHOW", OccurredAt: at},
			RoutingKeyTokenExpired,
			&waitingroomv1.TokenExpired{EventId: "t1.expired", OccurredAt: ts(at), QueueId: "q", UserId: "u", TokenId: "t1",
				Reason: waitingroomv1.TokenExpiredReason_TOKEN_EXPIRED_REASON_NO_SHOW},
		},
		{
			queue.Event{Type: "TokenExpired", ID: "t2.expired", Reason: "RESTORE_TOO_LATE", OccurredAt: at},
			RoutingKeyTokenExpired,
			&waitingroomv1.TokenExpired{EventId: "t2.expired", OccurredAt: ts(at),
				Reason: waitingroomv1.TokenExpiredReason_TOKEN_EXPIRED_REASON_RESTORE_TOO_LATE},
		},
	}
	for _, tt := range tests {
		got, key, err := FromOutbox(tt.in)
		if err != nil || key != tt.key || !proto.Equal(got, tt.want) {
			t.Errorf("FromOutbox(%s) = %v %q %v; want %v %q", tt.in.Type, got, key, err, tt.want, tt.key)
		}
	}
	if _, _, err := FromOutbox(queue.Event{Type: "Bogus"}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
}
