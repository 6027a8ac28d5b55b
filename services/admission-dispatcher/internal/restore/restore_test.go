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

func failure(edit func(*Failure)) Failure {
	f := Failure{QueueID: "sale", UserID: "user-1", TokenID: "tok-1", OrderID: "ord-1", Reason: "SOLD_OUT", Restorable: true, Redelivery: 2}
	if edit != nil {
		edit(&f)
	}
	return f
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

func TestFailuresWithoutValidIDsArePoison(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Failure)
	}{
		{"nothing at all", func(f *Failure) { *f = Failure{} }},
		{"no queue", func(f *Failure) { f.QueueID = "" }},
		{"upper-case queue", func(f *Failure) { f.QueueID = "Sale" }},
		{"queue with braces", func(f *Failure) { f.QueueID = "{sale}" }},
		{"queue of 65 characters", func(f *Failure) { f.QueueID = strings.Repeat("q", 65) }},
		{"no user", func(f *Failure) { f.UserID = "" }},
		{"user with a space", func(f *Failure) { f.UserID = "user 1" }},
		{"user of 129 characters", func(f *Failure) { f.UserID = strings.Repeat("u", 129) }},
		{"no token", func(f *Failure) { f.TokenID = "" }},
		{"no order", func(f *Failure) { f.OrderID = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeStore{replies: []reply{{out: queue.Restored}}}
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))

			if got := h.Handle(context.Background(), failure(tc.edit)); got != Poison {
				t.Errorf("result %v, want Poison (%v)", got, Poison)
			}
			if len(store.calls) != 0 || len(rec.got) != 0 {
				t.Errorf("%d restores, %d outcomes recorded; want 0 and 0", len(store.calls), len(rec.got))
			}
			if got := logLevels(t, &log); !slices.Equal(got, []string{logDeadLetterIDs}) {
				t.Errorf("log %q, want %q", got, logDeadLetterIDs)
			}
		})
	}
}

func TestStoreOutcomesAreAckedAndRecorded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(*Failure)
		out      queue.RestoreOutcome
		wantCall restoreCall
	}{
		{name: "restored", out: queue.Restored,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "expired meanwhile", out: queue.RestoreExpired,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "not restorable: freed", out: queue.Freed,
			edit: func(f *Failure) {
				f.Restorable = false
				f.Reason = "PAYMENT_DECLINED"
			},
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", false}},
		{name: "redelivery: duplicate", out: queue.Duplicate,
			wantCall: restoreCall{"sale", "user-1", "tok-1", "ord-1", true}},
		{name: "widest valid ids", out: queue.Restored,
			edit: func(f *Failure) {
				f.QueueID = "0" + strings.Repeat("-", 63)
				f.UserID = strings.Repeat("A", 120) + "_.:@|-z9"
			},
			wantCall: restoreCall{"0" + strings.Repeat("-", 63), strings.Repeat("A", 120) + "_.:@|-z9", "tok-1", "ord-1", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fakeStore{replies: []reply{{out: tc.out}}}
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))
			if got := h.Handle(context.Background(), failure(tc.edit)); got != Done {
				t.Errorf("result %v, want Done (%v)", got, Done)
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
		want           Result
		calls          int
		recorded       []restored
		log            []string
	}{
		{name: "a script error is retried by redelivery at once",
			replies: []reply{{err: errors.New("restore sale: WRONGTYPE")}},
			want:    Retry, calls: 1, log: []string{logRetry}},
		{name: "a cancelled call goes back to the queue",
			replies: []reply{{err: context.Canceled}},
			want:    Retry, calls: 1, log: []string{logRetry}},
		{name: "a short outage is waited out in the handler",
			replies: []reply{{err: unavailable}, {err: queue.ErrUnavailable}, {out: queue.Restored}},
			want:    Done, calls: 3, recorded: []restored{{"sale", queue.Restored}}, log: []string{logHandled}},
		{name: "another error after an outage goes back to the queue",
			replies: []reply{{err: unavailable}, {err: errors.New("restore sale: unknown reply")}},
			want:    Retry, calls: 2, log: []string{logRetry}},
		{name: "an outage past its allowance goes back to the queue",
			replies: []reply{{err: unavailable}}, unavailableFor: -time.Second,
			want: Retry, calls: 1, log: []string{logRetry}},
		{name: "shutdown during an outage goes back to the queue",
			replies: []reply{{err: unavailable}}, cancelOnCall: 1,
			want: Retry, calls: 1},
		{name: "shutdown on the second try",
			replies: []reply{{err: unavailable}}, cancelOnCall: 2,
			want: Retry, calls: 2},
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

			if got := h.Handle(ctx, failure(nil)); got != tc.want {
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
