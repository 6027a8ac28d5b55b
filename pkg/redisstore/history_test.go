package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// pastMinute moves everything q's line counted into the minute before the
// one it is in and forgets that the tick sent this minute (minuteMark), as
// if the minute had just ended: the tests cannot wait for the clock.
func pastMinute(t *testing.T, s *redisstore.Store, q string) (minute int64) {
	t.Helper()
	ctx := context.Background()
	rdb := s.Client()
	k := redisstore.KeysFor(q)
	all, err := rdb.HGetAll(ctx, k.Minutes()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("nothing counted to move")
	}
	var m int64
	moved := map[string]any{}
	for f, v := range all {
		ms, figure, _ := strings.Cut(f, ":")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			t.Fatalf("minutes field %q", f)
		}
		m = n - 1
		moved[fmt.Sprintf("%d:%s", m, figure)] = v
	}
	pipe := rdb.TxPipeline()
	pipe.Del(ctx, k.Minutes())
	pipe.HSet(ctx, k.Minutes(), moved)
	pipe.HDel(ctx, k.Dispatch(), "minuteMark")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

// histAdmit is lcAdmit with ticks that send the history, as the
// dispatcher's do.
func histAdmit(t *testing.T, s *redisstore.Store, q string, epoch, bound int64, n int) {
	t.Helper()
	admitWith(t, s, q, epoch, bound, n, true)
}

// minutesSent relays q's outbox and returns its QueueMinute events.
func minutesSent(t *testing.T, s *redisstore.Store, q string) (out []queue.Event) {
	t.Helper()
	for _, e := range lcRelayed(t, s, q) {
		if e.Type == queue.EventQueueMinute {
			out = append(out, e)
		}
	}
	return out
}

// TestHistoryCountsEachMinuteOnce: a line counts arrivals (a new place,
// not an enter again), leaves, admissions and their waits in the minute
// they happen; the first tick of the next minute sends the finished minute
// as one QueueMinute and forgets it, and no later tick (nor a repeat)
// sends it again.
func TestHistoryCountsEachMinuteOnce(t *testing.T) {
	t.Parallel()
	testenv.WithinAMinute(t, 10*time.Second)
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, nil)
	k := redisstore.KeysFor(q)
	fill(t, s, q, 6)
	fill(t, s, q, 2) // u0000 and u0001 again: no arrivals
	if _, err := s.Leave(ctx, q, "u0005"); err != nil {
		t.Fatal(err)
	}
	epoch := lead(t, s, q, "a")
	histAdmit(t, s, q, epoch, 0, 3)
	all := rdb.HGetAll(ctx, k.Minutes()).Val()
	var m string
	for f := range all {
		m, _, _ = strings.Cut(f, ":")
	}
	if all[m+":arr"] != "6" || all[m+":left"] != "1" || all[m+":adm"] != "3" {
		t.Fatalf("counted %v, want 6 arrivals, 1 leave, 3 admitted in minute %s", all, m)
	}
	// Nothing is sent while the minute lasts.
	if sent := minutesSent(t, s, q); len(sent) != 0 {
		t.Fatalf("sent %+v during the minute", sent)
	}

	minute := pastMinute(t, s, q)
	histAdmit(t, s, q, epoch, 0, 1)
	sent := minutesSent(t, s, q)
	if len(sent) != 1 {
		t.Fatalf("%d QueueMinute after the minute ended, want 1: %+v", len(sent), sent)
	}
	e := sent[0]
	var hist int64
	for _, n := range e.Counts.WaitHistogram {
		hist += n
	}
	c := e.Counts
	if e.QueueID != q || e.LineID != q || !e.Minute.Equal(time.UnixMilli(minute*60000)) ||
		c.Arrivals != 6 || c.Left != 1 || c.Admitted != 3 || c.ExpiredUnused != 0 || c.Abandoned != 0 || hist != 3 ||
		c.WaitMax <= 0 || c.WaitMax > time.Minute || e.ID != fmt.Sprintf("minute.%s.%d.1", q, minute) {
		t.Fatalf("sent %+v (%d waits), want minute %d of %s: 6 arrivals, 1 leave, 3 admitted with 3 waits under a minute", e, hist, minute, q)
	}
	// The sent minute is gone; the admission that sent it counts in the
	// minute it is in.
	left := rdb.HGetAll(ctx, k.Minutes()).Val()
	for f := range left {
		if strings.HasPrefix(f, strconv.FormatInt(minute, 10)+":") {
			t.Fatalf("field %s of the sent minute left: %v", f, left)
		}
	}
	if left[strconv.FormatInt(minute+1, 10)+":adm"] != "1" {
		t.Fatalf("minutes after the send: %v, want the new minute's 1 admitted", left)
	}
	histAdmit(t, s, q, epoch, 0, 1)
	if sent := minutesSent(t, s, q); len(sent) != 0 {
		t.Fatalf("a later tick of the same minute sent %+v", sent)
	}
}

// TestHistoryWaitsForRoomInTheOutbox: a finished minute is not sent while
// the outbox is at its bound (the tick is held) and is sent, once, when
// the relay has drained it.
func TestHistoryWaitsForRoomInTheOutbox(t *testing.T) {
	t.Parallel()
	testenv.WithinAMinute(t, 10*time.Second)
	s, _ := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	fill(t, s, q, 4)
	epoch := lead(t, s, q, "a")
	histAdmit(t, s, q, epoch, 2, 2) // the outbox is at its bound of 2
	pastMinute(t, s, q)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, OutboxBound: 2, Grants: grants(t, 2), History: true})
	if err != nil || r.Held != queue.HeldOutboxBacklog {
		t.Fatalf("tick at the bound: %+v %v, want held", r, err)
	}
	if n := lcAckAll(t, s, q); n != 2 {
		t.Fatalf("relayed %d, want the 2 TokenIssued only", n)
	}
	histAdmit(t, s, q, epoch, 2, 1)
	sent := minutesSent(t, s, q)
	if len(sent) != 1 || sent[0].Counts.Arrivals != 4 || sent[0].Counts.Admitted != 2 {
		t.Fatalf("sent %+v once there was room, want one QueueMinute of 4 arrivals, 2 admitted", sent)
	}
}

// TestHistoryOfAClosedQueueIsSentBeforeItGoes: closed, a line sends what
// it counted so far, the minute not over, and is deleted only once that
// is relayed too.
func TestHistoryOfAClosedQueueIsSentBeforeItGoes(t *testing.T) {
	t.Parallel()
	testenv.WithinAMinute(t, 10*time.Second)
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, nil)
	k := redisstore.KeysFor(q)
	fill(t, s, q, 2)
	if n, err := s.Close(ctx, q); err != nil || n != 2 {
		t.Fatalf("close: %d %v", n, err)
	}
	epoch := lead(t, s, q, "a")
	tick := func() queue.IssueResult {
		t.Helper()
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, Grants: grants(t, 1), History: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := tick(); r.Gone {
		t.Fatal("gone with its history unsent")
	}
	if n := rdb.HLen(ctx, k.Minutes()).Val(); n != 0 {
		t.Fatalf("%d minute fields left after the closed tick, want 0", n)
	}
	sent := minutesSent(t, s, q)
	if len(sent) != 1 || sent[0].Counts.Arrivals != 2 || sent[0].Counts.Admitted != 0 {
		t.Fatalf("sent %+v, want one QueueMinute of 2 arrivals", sent)
	}
	if r := tick(); !r.Gone {
		t.Fatalf("tick with the history relayed: %+v, want gone", r)
	}
}

// TestTheOrderPathIsRecordedWithTheTick: a tick given the order path's
// health records it; the admin figures show it while it is under 5 s old
// (queue.OrderPathFresh), and not after.
func TestTheOrderPathIsRecordedWithTheTick(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, nil)
	epoch := lead(t, s, q, "a")
	path := queue.OrderPath{P95: 230 * time.Millisecond, Attempts: 175, Created: 170, Unavailable: 2, OutboxBacklog: 12}
	if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, Grants: grants(t, 1), OrderPath: &path}); err != nil {
		t.Fatal(err)
	}
	_, st, err := s.Config(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	got := st.OrderPath
	if time.Since(got.At) > time.Minute {
		t.Fatalf("recorded at %v, want about now", got.At)
	}
	got.At = time.Time{}
	if got != path {
		t.Fatalf("order path %+v, want %+v", got, path)
	}
	if err := rdb.HSet(ctx, redisstore.KeysFor(q).Dispatch(), "orderPathMs", time.Now().Add(-6*time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := s.Config(ctx, q); !st.OrderPath.At.IsZero() {
		t.Fatalf("an order path 6 s old shown: %+v", st.OrderPath)
	}
}
