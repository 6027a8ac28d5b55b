package wire

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
)

type countingStore struct {
	calls []string
	out   queue.RestoreOutcome
	err   error
}

func (s *countingStore) Restore(_ context.Context, q, user, tokenID, orderID string, restorable bool) (queue.RestoreOutcome, error) {
	s.calls = append(s.calls, strings.Join([]string{q, user, tokenID, orderID}, "/"))
	return s.out, s.err
}

type nopRecorder struct{}

func (nopRecorder) Restored(string, queue.RestoreOutcome) {}

// The consumer decodes OrderFailed deliveries for the restore handler:
// what is not one, or cannot be decoded, is dead-lettered without a restore;
// the handler's result becomes the broker's.
func TestOrderFailedConsumer(t *testing.T) {
	ev := &waitingroomv1.OrderFailed{EventId: "ev-1", QueueId: "sale", UserId: "user-1", TokenId: "tok-1", OrderId: "ord-1",
		Reason: waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_SOLD_OUT, Restorable: true}
	body, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	valid := broker.Delivery{MessageID: "ev-1", Type: events.TypeName(ev), Body: body, DeliveryCount: 2}
	for _, tc := range []struct {
		name     string
		edit     func(*broker.Delivery)
		storeErr error
		want     broker.Result
		restores int
		log      string
	}{
		{name: "an OrderFailed", want: broker.Ack, restores: 1, log: "order failure handled"},
		{name: "no type property", edit: func(d *broker.Delivery) { d.Type = "" }, want: broker.Ack, restores: 1, log: "order failure handled"},
		{name: "another event type", edit: func(d *broker.Delivery) { d.Type = events.TypeName(&waitingroomv1.OrderCreated{}) },
			want: broker.DeadLetter, log: "unexpected message type on the order-failed queue: dead-lettered"},
		{name: "unknown type", edit: func(d *broker.Delivery) { d.Type = "OrderFailed" },
			want: broker.DeadLetter, log: "unexpected message type on the order-failed queue: dead-lettered"},
		{name: "undecodable body", edit: func(d *broker.Delivery) { d.Body = []byte{0xff, 0xff} },
			want: broker.DeadLetter, log: "undecodable OrderFailed: dead-lettered"},
		{name: "truncated body", edit: func(d *broker.Delivery) { d.Body = d.Body[:len(d.Body)-3] },
			want: broker.DeadLetter, log: "undecodable OrderFailed: dead-lettered"},
		{name: "empty body: no ids", edit: func(d *broker.Delivery) { d.Body = nil },
			want: broker.DeadLetter, log: "OrderFailed without valid queue, user, token and order ids: dead-lettered"},
		{name: "the store failing", storeErr: queue.ErrNotFound, want: broker.Retry, restores: 1, log: "restore failed: will be redelivered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := valid
			d.Body = append([]byte(nil), valid.Body...)
			if tc.edit != nil {
				tc.edit(&d)
			}
			store := &countingStore{out: queue.Restored, err: tc.storeErr}
			var log bytes.Buffer
			l := slog.New(slog.NewTextHandler(&log, nil))
			consume := orderFailedConsumer(restore.NewHandler(store, nopRecorder{}, l), l)
			if got := consume(context.Background(), d); got != tc.want {
				t.Errorf("result %v, want %v", got, tc.want)
			}
			if len(store.calls) != tc.restores || (tc.restores == 1 && store.calls[0] != "sale/user-1/tok-1/ord-1") {
				t.Errorf("restores %v, want %d", store.calls, tc.restores)
			}
			if n := strings.Count(log.String(), "\n"); n != 1 || !strings.Contains(log.String(), tc.log) {
				t.Errorf("log %q, want one line with %q", log.String(), tc.log)
			}
		})
	}
}
