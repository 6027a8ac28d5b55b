package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// restoreCall is one call of Store.Restore.
type restoreCall struct {
	q, user, token, order string
	restorable            bool
}

type reply struct {
	out queue.RestoreOutcome
	err error
}

// fakeStore answers Restore from a script, the last reply repeating, and
// records its calls. onCall, when set, runs inside the n-th call (from 1).
type fakeStore struct {
	replies []reply
	calls   []restoreCall
	onCall  func(n int)
}

func (s *fakeStore) Restore(_ context.Context, q, user, tokenID, orderID string, restorable bool) (queue.RestoreOutcome, error) {
	s.calls = append(s.calls, restoreCall{q, user, tokenID, orderID, restorable})
	if s.onCall != nil {
		s.onCall(len(s.calls))
	}
	r := s.replies[min(len(s.calls), len(s.replies))-1]
	return r.out, r.err
}

type restored struct {
	q   string
	out queue.RestoreOutcome
}

type fakeRecorder struct{ got []restored }

func (r *fakeRecorder) Restored(q string, o queue.RestoreOutcome) {
	r.got = append(r.got, restored{q, o})
}

func orderFailed(edit func(*waitingroomv1.OrderFailed)) *waitingroomv1.OrderFailed {
	ev := &waitingroomv1.OrderFailed{
		EventId:    "ev-1",
		QueueId:    "sale",
		UserId:     "user-1",
		TokenId:    "tok-1",
		OrderId:    "ord-1",
		Reason:     waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_SOLD_OUT,
		Restorable: true,
	}
	if edit != nil {
		edit(ev)
	}
	return ev
}

func deliver(t *testing.T, ev *waitingroomv1.OrderFailed) broker.Delivery {
	t.Helper()
	body, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Delivery{MessageID: ev.GetEventId(), Type: events.TypeName(ev), Body: body, DeliveryCount: 2}
}

// logLevels returns the level and message of every record in a JSON log.
func logLevels(t *testing.T, log *bytes.Buffer) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec.Level+" "+rec.Msg)
	}
	return out
}

const (
	logDeadLetterIDs = "ERROR OrderFailed without valid queue, user, token and order ids: dead-lettered"
	logHandled       = "INFO order failure handled"
	logRetry         = "WARN restore failed: will be redelivered"
)

func TestMalformedDeliveriesAreDeadLettered(t *testing.T) {
	valid := func(t *testing.T) broker.Delivery { return deliver(t, orderFailed(nil)) }
	with := func(edit func(*waitingroomv1.OrderFailed)) func(*testing.T) broker.Delivery {
		return func(t *testing.T) broker.Delivery { return deliver(t, orderFailed(edit)) }
	}
	for _, tc := range []struct {
		name     string
		delivery func(*testing.T) broker.Delivery
		log      string
	}{
		{name: "another event type", log: "ERROR unexpected message type on the order-failed queue: dead-lettered",
			delivery: func(t *testing.T) broker.Delivery {
				d := valid(t)
				d.Type = events.TypeName(&waitingroomv1.OrderCreated{})
				return d
			}},
		{name: "unknown type", log: "ERROR unexpected message type on the order-failed queue: dead-lettered",
			delivery: func(t *testing.T) broker.Delivery { d := valid(t); d.Type = "OrderFailed"; return d }},
		{name: "undecodable body", log: "ERROR undecodable OrderFailed: dead-lettered",
			delivery: func(t *testing.T) broker.Delivery { d := valid(t); d.Body = []byte{0xff, 0xff}; return d }},
		{name: "truncated body", log: "ERROR undecodable OrderFailed: dead-lettered",
			delivery: func(t *testing.T) broker.Delivery { d := valid(t); d.Body = d.Body[:len(d.Body)-3]; return d }},
		{name: "empty body", log: logDeadLetterIDs,
			delivery: func(t *testing.T) broker.Delivery { d := valid(t); d.Body = nil; return d }},
		{name: "no queue", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.QueueId = "" })},
		{name: "upper-case queue", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.QueueId = "Sale" })},
		{name: "queue with braces", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.QueueId = "{sale}" })},
		{name: "queue of 65 characters", log: logDeadLetterIDs,
			delivery: with(func(e *waitingroomv1.OrderFailed) { e.QueueId = strings.Repeat("q", 65) })},
		{name: "no user", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.UserId = "" })},
		{name: "user with a space", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.UserId = "user 1" })},
		{name: "user of 129 characters", log: logDeadLetterIDs,
			delivery: with(func(e *waitingroomv1.OrderFailed) { e.UserId = strings.Repeat("u", 129) })},
		{name: "no token", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.TokenId = "" })},
		{name: "no order", log: logDeadLetterIDs, delivery: with(func(e *waitingroomv1.OrderFailed) { e.OrderId = "" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeStore{replies: []reply{{out: queue.Restored}}}
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))

			if got := h.Handle(context.Background(), tc.delivery(t)); got != broker.DeadLetter {
				t.Errorf("result %v, want DeadLetter (%v)", got, broker.DeadLetter)
			}
			if len(store.calls) != 0 || len(rec.got) != 0 {
				t.Errorf("%d restores, %d outcomes recorded; want 0 and 0", len(store.calls), len(rec.got))
			}
			if got := logLevels(t, &log); !slices.Equal(got, []string{tc.log}) {
				t.Errorf("log %q, want %q", got, tc.log)
			}
		})
	}
}

func TestStoreOutcomesAreAckedAndRecorded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(*waitingroomv1.OrderFailed)
		noType   bool // a delivery without the type property
		out      queue.RestoreOutcome
		wantCall restoreCall
	}{
		{name: "restored", out: queue.Restored,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "expired meanwhile", out: queue.RestoreExpired,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "not restorable: freed", out: queue.Freed,
			edit: func(e *waitingroomv1.OrderFailed) {
				e.Restorable = false
				e.Reason = waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_PAYMENT_DECLINED
			},
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", false}},
		{name: "redelivery: duplicate", out: queue.Duplicate,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "no type property", noType: true, out: queue.Restored,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "widest valid ids", out: queue.Restored,
			edit: func(e *waitingroomv1.OrderFailed) {
				e.QueueId = "0" + strings.Repeat("-", 63)
				e.UserId = strings.Repeat("A", 120) + "_.:@|-z9"
			},
			wantCall: restoreCall{"0" + strings.Repeat("-", 63), strings.Repeat("A", 120) + "_.:@|-z9", "tok-1", "ord-1", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeStore{replies: []reply{{out: tc.out}}}
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))
			d := deliver(t, orderFailed(tc.edit))
			if tc.noType {
				d.Type = ""
			}

			if got := h.Handle(context.Background(), d); got != broker.Ack {
				t.Errorf("result %v, want Ack (%v)", got, broker.Ack)
			}
			if !slices.Equal(store.calls, []restoreCall{tc.wantCall}) {
				t.Errorf("restores %+v, want one %+v", store.calls, tc.wantCall)
			}
			if want := []restored{{tc.wantCall.q, tc.out}}; !slices.Equal(rec.got, want) {
				t.Errorf("recorded %+v, want %+v", rec.got, want)
			}
			if got := logLevels(t, &log); !slices.Equal(got, []string{logHandled}) {
				t.Errorf("log %q, want %q", got, logHandled)
			}
		})
	}
}

func TestStoreFailures(t *testing.T) {
	unavailable := fmt.Errorf("restore sale: %w", queue.ErrUnavailable)
	for _, tc := range []struct {
		name           string
		replies        []reply
		unavailableFor time.Duration
		cancelOnCall   int // cancels the handler's context inside this call
		want           broker.Result
		calls          int
		recorded       []restored
		log            []string
	}{
		{name: "a script error is retried by redelivery at once",
			replies: []reply{{err: errors.New("restore sale: WRONGTYPE")}},
			want:    broker.Retry, calls: 1, log: []string{logRetry}},
		{name: "a cancelled call goes back to the queue",
			replies: []reply{{err: context.Canceled}},
			want:    broker.Retry, calls: 1, log: []string{logRetry}},
		{name: "a short outage is waited out in the handler",
			replies: []reply{{err: unavailable}, {err: queue.ErrUnavailable}, {out: queue.Restored}},
			want:    broker.Ack, calls: 3, recorded: []restored{{"sale", queue.Restored}}, log: []string{logHandled}},
		{name: "another error after an outage goes back to the queue",
			replies: []reply{{err: unavailable}, {err: errors.New("restore sale: unknown reply")}},
			want:    broker.Retry, calls: 2, log: []string{logRetry}},
		{name: "an outage past its allowance goes back to the queue",
			replies: []reply{{err: unavailable}}, unavailableFor: -time.Second,
			want: broker.Retry, calls: 1, log: []string{logRetry}},
		{name: "shutdown during an outage goes back to the queue",
			replies: []reply{{err: unavailable}}, cancelOnCall: 1,
			want: broker.Retry, calls: 1},
		{name: "shutdown on the second try",
			replies: []reply{{err: unavailable}}, cancelOnCall: 2,
			want: broker.Retry, calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			store := &fakeStore{replies: tc.replies}
			if tc.cancelOnCall > 0 {
				store.onCall = func(n int) {
					if n == tc.cancelOnCall {
						cancel()
					}
				}
			}
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))
			if tc.unavailableFor != 0 {
				h.unavailableFor = tc.unavailableFor
			}

			if got := h.Handle(ctx, deliver(t, orderFailed(nil))); got != tc.want {
				t.Errorf("result %v, want %v", got, tc.want)
			}
			if len(store.calls) != tc.calls {
				t.Errorf("%d restores, want %d", len(store.calls), tc.calls)
			}
			for i, c := range store.calls {
				if c != (restoreCall{"sale", "user-1", "tok-1", "ord-1", true}) {
					t.Errorf("restore %d: %+v", i, c)
				}
			}
			if !slices.Equal(rec.got, tc.recorded) {
				t.Errorf("recorded %+v, want %+v", rec.got, tc.recorded)
			}
			if got := logLevels(t, &log); !slices.Equal(got, tc.log) {
				t.Errorf("log %q, want %q", got, tc.log)
			}
		})
	}
}

func TestHandlerHoldsADeliveryThirtySecondsThroughAnOutage(t *testing.T) {
	h := NewHandler(&fakeStore{}, &fakeRecorder{}, slog.New(slog.DiscardHandler))
	if h.unavailableFor != 30*time.Second {
		t.Errorf("unavailableFor %v, want 30s", h.unavailableFor)
	}
}
