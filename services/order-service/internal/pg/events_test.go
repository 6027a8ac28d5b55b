package pg_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// Every domain event is encoded as its waitingroom.v1 message, field by
// field, with the routing key and type name consumers route and decode by.
func TestEncode(t *testing.T) {
	at := time.Date(2026, 5, 9, 12, 0, 0, 123_000_000, time.UTC)
	o := order.Order{ID: "o-1", UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 3, EntryTokenID: "tok-1",
		Status: order.StatusCreated, CreatedAt: at}
	bypassed := o
	bypassed.ID, bypassed.EntryTokenID, bypassed.Bypassed = "o-2", "bypass-o-2", true
	failed := func(r order.FailureReason, restorable bool) order.Failed {
		return order.Failed{QueueID: "sale", UserID: "alice", TokenID: "tok-1", OrderID: "o-1", Reason: r,
			Restorable: restorable, RemainingTTL: 90 * time.Second, At: at}
	}
	for _, tc := range []struct {
		name string
		ev   order.Event
		want proto.Message
	}{
		{"created", order.Created{Order: o}, &waitingroomv1.OrderCreated{EventId: "o-1.created", OccurredAt: timestamppb.New(at),
			QueueId: "sale", UserId: "alice", OrderId: "o-1", TokenId: "tok-1", ProductId: "sku-1", Quantity: 3}},
		{"created bypassed", order.Created{Order: bypassed}, &waitingroomv1.OrderCreated{EventId: "o-2.created", OccurredAt: timestamppb.New(at),
			QueueId: "sale", UserId: "alice", OrderId: "o-2", TokenId: "bypass-o-2", ProductId: "sku-1", Quantity: 3, Bypassed: true}},
		{"sold out", failed(order.ReasonSoldOut, false), orderFailed(waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_SOLD_OUT, false)},
		{"database", failed(order.ReasonDatabaseError, true), orderFailed(waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_DATABASE_ERROR, true)},
		{"timeout", failed(order.ReasonTimeout, true), orderFailed(waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_TIMEOUT, true)},
		{"invalid", failed(order.ReasonInvalidRequest, true), orderFailed(waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_INVALID_REQUEST, true)},
		{"abandoned", failed(order.ReasonAbandoned, true), orderFailed(waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_ABANDONED, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pg.Encode(tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			key, _ := events.RoutingKey(tc.want)
			if got.EventID != tc.ev.EventID() || got.RoutingKey != key || got.Type != events.TypeName(tc.want) || !got.OccurredAt.Equal(at) {
				t.Fatalf("encoded as %s %s %s at %s; want %s %s %s at %s", got.EventID, got.RoutingKey, got.Type, got.OccurredAt,
					tc.ev.EventID(), key, events.TypeName(tc.want), at)
			}
			msg, err := events.Decode(got.Type, got.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(msg, tc.want) {
				t.Fatalf("payload %v, want %v", msg, tc.want)
			}
		})
	}
}

func TestEncodeRefusesWhatIsNoEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   order.Event
		want string
	}{
		{"nil", nil, "no event"},
		{"unknown reason", order.Failed{TokenID: "t", OrderID: "o", Reason: "PAYMENT_FORGOTTEN"}, `no OrderFailureReason for "PAYMENT_FORGOTTEN"`},
		{"foreign type", foreign{}, "is not an order event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pg.Encode(tc.ev); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Encode: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

type foreign struct{}

func (foreign) EventID() string { return "foreign" }
func (foreign) Attempt() string { return "" }

func orderFailed(r waitingroomv1.OrderFailureReason, restorable bool) *waitingroomv1.OrderFailed {
	return &waitingroomv1.OrderFailed{EventId: "tok-1.failed.o-1", OccurredAt: timestamppb.New(time.Date(2026, 5, 9, 12, 0, 0, 123_000_000, time.UTC)),
		QueueId: "sale", UserId: "alice", TokenId: "tok-1", OrderId: "o-1", Reason: r, Restorable: restorable, RemainingTtlMs: 90_000}
}
