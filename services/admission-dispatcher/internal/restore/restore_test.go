package restore_test

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
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore/restoretest"
)

// consumedStore returns a store where user's token tok-1 (secret
// "secret") in queue q was consumed by the attempt ord-1 and expires ttl
// from now.
func consumedStore(t *testing.T, q, user string, ttl time.Duration) *restoretest.Store {
	t.Helper()
	s := restoretest.NewStore()
	s.Issue(q, user, restoretest.Token{Secret: "secret", ID: "tok-1", TTL: ttl})
	if _, err := s.Consume(q, user, "secret", "ord-1"); err != nil {
		t.Fatal(err)
	}
	return s
}

type restored struct {
	q   string
	out queue.RestoreOutcome
}

type fakeRecorder struct{ got []restored }

func (r *fakeRecorder) Restored(q string, o queue.RestoreOutcome) {
	r.got = append(r.got, restored{q, o})
}

func failure(edit func(*restore.Failure)) restore.Failure {
	f := restore.Failure{QueueID: "sale", UserID: "user-1", TokenID: "tok-1", OrderID: "ord-1", Reason: "SOLD_OUT", Restorable: true, Redelivery: 2}
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
		edit func(*restore.Failure)
	}{
		{"nothing at all", func(f *restore.Failure) { *f = restore.Failure{} }},
		{"no queue", func(f *restore.Failure) { f.QueueID = "" }},
		{"upper-case queue", func(f *restore.Failure) { f.QueueID = "Sale" }},
		{"queue with braces", func(f *restore.Failure) { f.QueueID = "{sale}" }},
		{"queue of 65 characters", func(f *restore.Failure) { f.QueueID = strings.Repeat("q", 65) }},
		{"no user", func(f *restore.Failure) { f.UserID = "" }},
		{"user with a space", func(f *restore.Failure) { f.UserID = "user 1" }},
		{"user of 129 characters", func(f *restore.Failure) { f.UserID = strings.Repeat("u", 129) }},
		{"no token", func(f *restore.Failure) { f.TokenID = "" }},
		{"no order", func(f *restore.Failure) { f.OrderID = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := consumedStore(t, "sale", "user-1", time.Minute)
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := restore.NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))

			if got := h.Handle(context.Background(), failure(tc.edit)); got != restore.Poison {
				t.Errorf("result %v, want Poison (%v)", got, restore.Poison)
			}
			if len(store.Calls()) != 0 || len(rec.got) != 0 {
				t.Errorf("%d restores, %d outcomes recorded; want 0 and 0", len(store.Calls()), len(rec.got))
			}
			if got := logLevels(t, &log); !slices.Equal(got, []string{logDeadLetterIDs}) {
				t.Errorf("log %q, want %q", got, logDeadLetterIDs)
			}
		})
	}
}

func TestStoreOutcomesAreAckedAndRecorded(t *testing.T) {
	widestQueue, widestUser := "0"+strings.Repeat("-", 63), strings.Repeat("A", 120)+"_.:@|-z9"
	for _, tc := range []struct {
		name string
		edit func(*restore.Failure)
		// The store's state: the attempt consumed the token of user-1
		// (or widestUser) in sale (or widestQueue) with ttl left, then
		// waited wait; handled says its failure was handled before.
		ttl, wait time.Duration
		handled   bool
		out       queue.RestoreOutcome
		wantCall  restoretest.Call
	}{
		{name: "restored", ttl: time.Minute, out: queue.Restored,
			wantCall: restoretest.Call{Q: "sale", User: "user-1", TokenID: "tok-1", OrderID: "ord-1", Restorable: true}},
		{name: "expired meanwhile", ttl: 50 * time.Millisecond, wait: 100 * time.Millisecond, out: queue.RestoreExpired,
			wantCall: restoretest.Call{Q: "sale", User: "user-1", TokenID: "tok-1", OrderID: "ord-1", Restorable: true}},
		{name: "not restorable: freed", ttl: time.Minute, out: queue.Freed,
			edit: func(f *restore.Failure) {
				f.Restorable = false
				f.Reason = "PAYMENT_DECLINED"
			},
			wantCall: restoretest.Call{Q: "sale", User: "user-1", TokenID: "tok-1", OrderID: "ord-1"}},
		{name: "redelivery: duplicate", ttl: time.Minute, handled: true, out: queue.Duplicate,
			wantCall: restoretest.Call{Q: "sale", User: "user-1", TokenID: "tok-1", OrderID: "ord-1", Restorable: true}},
		{name: "widest valid ids", ttl: time.Minute, out: queue.Restored,
			edit: func(f *restore.Failure) {
				f.QueueID = widestQueue
				f.UserID = widestUser
			},
			wantCall: restoretest.Call{Q: widestQueue, User: widestUser, TokenID: "tok-1", OrderID: "ord-1", Restorable: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := consumedStore(t, tc.wantCall.Q, tc.wantCall.User, tc.ttl)
			time.Sleep(tc.wait)
			if tc.handled {
				if out, err := store.Restore(context.Background(), tc.wantCall.Q, tc.wantCall.User, "tok-1", "ord-1", true); err != nil || out != queue.Restored {
					t.Fatalf("first delivery: %s %v", out, err)
				}
			}
			before := len(store.Calls())
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := restore.NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))
			if got := h.Handle(context.Background(), failure(tc.edit)); got != restore.Done {
				t.Errorf("result %v, want Done (%v)", got, restore.Done)
			}
			if calls := store.Calls()[before:]; !slices.Equal(calls, []restoretest.Call{tc.wantCall}) {
				t.Errorf("restores %+v, want one %+v", calls, tc.wantCall)
			}
			if want := []restored{{tc.wantCall.Q, tc.out}}; !slices.Equal(rec.got, want) {
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
		name string
		// errs fail the store's calls in turn, the last one repeating;
		// nil lets the call through to the store (which restores).
		errs           []error
		unavailableFor time.Duration
		cancelOnCall   int // cancels the handler's context inside this call
		want           restore.Result
		calls          int
		recorded       []restored
		log            []string
	}{
		{name: "a script error is retried by redelivery at once",
			errs: []error{errors.New("restore sale: WRONGTYPE")},
			want: restore.Retry, calls: 1, log: []string{logRetry}},
		{name: "a cancelled call goes back to the queue",
			errs: []error{context.Canceled},
			want: restore.Retry, calls: 1, log: []string{logRetry}},
		{name: "a short outage is waited out in the handler",
			errs: []error{unavailable, queue.ErrUnavailable, nil},
			want: restore.Done, calls: 3, recorded: []restored{{"sale", queue.Restored}}, log: []string{logHandled}},
		{name: "another error after an outage goes back to the queue",
			errs: []error{unavailable, errors.New("restore sale: unknown reply")},
			want: restore.Retry, calls: 2, log: []string{logRetry}},
		{name: "an outage past its allowance goes back to the queue",
			errs: []error{unavailable}, unavailableFor: -time.Second,
			want: restore.Retry, calls: 1, log: []string{logRetry}},
		{name: "shutdown during an outage goes back to the queue",
			errs: []error{unavailable}, cancelOnCall: 1,
			want: restore.Retry, calls: 1},
		{name: "shutdown on the second try",
			errs: []error{unavailable}, cancelOnCall: 2,
			want: restore.Retry, calls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			store := consumedStore(t, "sale", "user-1", time.Minute)
			store.FailWith(func(n int) error {
				if n == tc.cancelOnCall {
					cancel()
				}
				return tc.errs[min(n, len(tc.errs))-1]
			})
			rec := &fakeRecorder{}
			var log bytes.Buffer
			h := restore.NewHandler(store, rec, slog.New(slog.NewJSONHandler(&log, nil)))
			if tc.unavailableFor != 0 {
				restore.SetUnavailableFor(h, tc.unavailableFor)
			}

			if got := h.Handle(ctx, failure(nil)); got != tc.want {
				t.Errorf("result %v, want %v", got, tc.want)
			}
			calls := store.Calls()
			if len(calls) != tc.calls {
				t.Errorf("%d restores, want %d", len(calls), tc.calls)
			}
			for i, c := range calls {
				if c != (restoretest.Call{Q: "sale", User: "user-1", TokenID: "tok-1", OrderID: "ord-1", Restorable: true}) {
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
	h := restore.NewHandler(restoretest.NewStore(), &fakeRecorder{}, slog.New(slog.DiscardHandler))
	if d := restore.UnavailableFor(h); d != 30*time.Second {
		t.Errorf("unavailableFor %v, want 30s", d)
	}
}
