package dispatchtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// The draw at a queue's start (part of RunTicksContract).

// startsSoon is how far ahead the cases' start times are: time for the
// pre-queue's enters on a busy machine.
const startsSoon = 800 * time.Millisecond

// scheduled makes a queue of shards lines starting soon with n people
// pre-queued, and waits until its start.
func scheduled(t *testing.T, s dispatch.Store, h Harness, shards, n int) (string, []string) {
	t.Helper()
	starts := h.Now(t).Add(startsSoon)
	q := newQueue(t, h, func(c *queue.Config) { c.StartsAt, c.Shards = starts, shards })
	pre := enter(t, h, q, n)
	_, st, err := s.Config(context.Background(), q)
	if err != nil || st.Draw == nil || st.Draw.State != queue.DrawScheduled || st.Draw.PreQueued != int64(n) || st.Waiting != 0 {
		t.Fatalf("before the start: %+v %v, want %d pre-queued, nobody waiting", st, err, n)
	}
	h.Wait(t, starts.Sub(h.Now(t))+50*time.Millisecond)
	return q, pre
}

func drawOrder(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, pre := scheduled(t, s, h, 1, 5)
	h.Enter(t, q, "late") // closes the pre-queue: after all of them
	e := lead(t, s, q, "a", 10*time.Second)
	if r := mustIssue(t, s, q, e, grants(t, 5)); r.Held != queue.HeldDraw || r.Issued != 0 || r.Waiting != 1 {
		t.Fatalf("tick after the start: %+v, want held %s with the late one waiting", r, queue.HeldDraw)
	}
	w, err := s.StartDraw(ctx, q, e, queue.DrawTotals{})
	remaining := slices.Sorted(slices.Values(w.Remaining))
	if err != nil || w.State != queue.DrawDrawing || w.Count != 5 || w.PreQueued != 5 || w.Placed != 0 || !slices.Equal(remaining, pre) {
		t.Fatalf("start the draw: %+v %v, want DRAWING with the 5 pre-queued to place", w, err)
	}
	sha, err := queue.SeedSHA256(w.Seed)
	if err != nil {
		t.Fatal(err)
	}
	started := newEvents(t, s, q)
	if len(started) != 1 || started[0].Type != queue.EventQueueStarted || started[0].SeedSHA256 != sha || started[0].PreQueued != 5 {
		t.Fatalf("outbox after the start: %+v, want QueueStarted with the seed's hash, 5 pre-queued", started)
	}
	if _, err := s.StartDraw(ctx, q, e, queue.DrawTotals{}); err != nil || len(newEvents(t, s, q)) != 0 {
		t.Fatalf("start the draw again: %v, want no second QueueStarted", err)
	}
	order, err := queue.DrawOrder(w.Seed, w.Remaining)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		users             []string
		placed, remaining int64
	}{{order[:2], 2, 3}, {order[:2], 2, 3}} { // a repeat changes nothing
		if w, err := s.PlaceDrawn(ctx, q, e, step.users); err != nil || w.Placed != step.placed || w.PreQueued != step.remaining {
			t.Fatalf("place %v: %+v %v, want %d placed, %d to go", step.users, w, err, step.placed, step.remaining)
		}
	}
	if w, err := s.FinishDraw(ctx, q, e, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawing || len(newEvents(t, s, q)) != 0 {
		t.Fatalf("finish with 3 to place: %+v %v, want still DRAWING, no event", w, err)
	}
	if w, err := s.PlaceDrawn(ctx, q, e, order[2:]); err != nil || w.Placed != 5 || w.PreQueued != 0 {
		t.Fatalf("place the rest: %+v %v, want 5 placed", w, err)
	}
	if w, err := s.FinishDraw(ctx, q, e, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn || w.Placed != 5 || w.Count != 5 {
		t.Fatalf("finish: %+v %v, want DRAWN, 5 placed", w, err)
	}
	drawn := newEvents(t, s, q)
	if len(drawn) != 1 || drawn[0].Type != queue.EventQueueDrawn || drawn[0].Seed != w.Seed || drawn[0].Placed != 5 ||
		drawn[0].PreQueued != 5 || drawn[0].LastSeq != drawn[0].FirstSeq+4 {
		t.Fatalf("outbox after the draw: %+v, want QueueDrawn with the seed, 5 placed at 5 numbers", drawn)
	}
	if w, err := s.FinishDraw(ctx, q, e, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn || len(newEvents(t, s, q)) != 0 {
		t.Fatalf("finish again: %+v %v, want DRAWN, no second QueueDrawn", w, err)
	}
	h.Wait(t, settle)
	mustIssue(t, s, q, e, grants(t, 10))
	evs := newEvents(t, s, q)
	if want := append(slices.Clone(order), "late"); !slices.Equal(users(evs), want) {
		t.Fatalf("admitted %v, want the drawn order, then the late one: %v", users(evs), want)
	}
	for i, ev := range evs {
		if ev.Seq != drawn[0].FirstSeq+int64(i) {
			t.Fatalf("admission %d at number %d, want %d", i, ev.Seq, drawn[0].FirstSeq+int64(i))
		}
	}
}

func drawLines(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, pre := scheduled(t, s, h, 2, 8)
	e := leadLines(t, s, q, "a", 2)
	for i := range 2 {
		if r := issue(s, q, i, e, nil, nil); r.Err != nil || r.Held != queue.HeldDraw {
			t.Fatalf("tick of line %d after the start: %+v, want held %s", i, r, queue.HeldDraw)
		}
	}
	line1 := queue.LineID(q, 1)
	w1, err1 := s.StartDraw(ctx, line1, e, queue.DrawTotals{Quiet: true})
	w0, err0 := s.StartDraw(ctx, q, e, queue.DrawTotals{OthersPreQueued: w1.Count})
	remaining := slices.Sorted(slices.Values(append(slices.Clone(w0.Remaining), w1.Remaining...)))
	if err0 != nil || err1 != nil || w0.State != queue.DrawDrawing || w1.State != queue.DrawDrawing || w0.Seed != w1.Seed ||
		w0.Count+w1.Count != 8 || !slices.Equal(remaining, pre) {
		t.Fatalf("start the lines' draws: %+v %v, %+v %v; want DRAWING with one seed over the 8 pre-queued", w0, err0, w1, err1)
	}
	if evs := newEvents(t, s, q); len(evs) != 1 || evs[0].Type != queue.EventQueueStarted || evs[0].PreQueued != 8 {
		t.Fatalf("line 0's outbox after the start: %+v, want QueueStarted of all 8", evs)
	}
	for i, w := range []queue.DrawWork{w0, w1} {
		order, err := queue.DrawOrder(w.Seed, w.Remaining)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PlaceDrawn(ctx, queue.LineID(q, i), e, order); err != nil {
			t.Fatal(err)
		}
	}
	f1, err1 := s.FinishDraw(ctx, line1, e, queue.DrawTotals{Quiet: true})
	f0, err0 := s.FinishDraw(ctx, q, e, queue.DrawTotals{OthersPreQueued: w1.Count, OthersPlaced: f1.Placed})
	if err0 != nil || err1 != nil || f0.State != queue.DrawDrawn || f1.State != queue.DrawDrawn || f0.Placed+f1.Placed != 8 {
		t.Fatalf("finish the lines' draws: %+v %v, %+v %v; want both DRAWN, 8 placed", f0, err0, f1, err1)
	}
	evs := newEvents(t, s, q)
	if len(evs) != 1 || evs[0].Type != queue.EventQueueDrawn || evs[0].PreQueued != 8 || evs[0].Placed != 8 ||
		evs[0].LastSeq-evs[0].FirstSeq+1 != w0.Count {
		t.Fatalf("line 0's outbox after the draw: %+v, want QueueDrawn of all 8, line 0's %d numbers", evs, w0.Count)
	}
	if evs := newEvents(t, s, line1); len(evs) != 0 {
		t.Fatalf("line 1's outbox: %+v, want nothing (its steps are quiet)", evs)
	}
}

func drawNothing(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, nil)
	e := lead(t, s, q, "a", 10*time.Second)
	steps := map[string]func(epoch int64) (queue.DrawWork, error){
		"start":  func(epoch int64) (queue.DrawWork, error) { return s.StartDraw(ctx, q, epoch, queue.DrawTotals{}) },
		"place":  func(epoch int64) (queue.DrawWork, error) { return s.PlaceDrawn(ctx, q, epoch, []string{"someone"}) },
		"finish": func(epoch int64) (queue.DrawWork, error) { return s.FinishDraw(ctx, q, epoch, queue.DrawTotals{}) },
	}
	for name, step := range steps {
		if w, err := step(e); err != nil || w.State != "" || w.Count != 0 {
			t.Fatalf("%s a draw of a queue without a start time: %+v %v, want a zero draw", name, w, err)
		}
		if _, err := step(e - 1); !errors.Is(err, queue.ErrStaleEpoch) {
			t.Fatalf("%s at a stale epoch: %v, want ErrStaleEpoch", name, err)
		}
	}
	if _, err := s.StartDraw(ctx, "not a line", e, queue.DrawTotals{}); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("start the draw of a malformed line id: %v, want ErrNotFound", err)
	}
	later := newQueue(t, h, func(c *queue.Config) { c.StartsAt = h.Now(t).Add(time.Hour) })
	h.Enter(t, later, "early")
	el := lead(t, s, later, "a", 10*time.Second)
	if w, err := s.StartDraw(ctx, later, el, queue.DrawTotals{}); err != nil || w.State != queue.DrawScheduled || w.Remaining != nil {
		t.Fatalf("start the draw before the start time: %+v %v, want SCHEDULED, nobody to place", w, err)
	}
	if n := outboxLen(t, s, later); n != 0 {
		t.Fatalf("outbox before the start: %d events, want none", n)
	}
	if r := mustIssue(t, s, later, el, nil); r.Held != "" || r.Waiting != 0 {
		t.Fatalf("tick before the start: %+v, want not held, nobody waiting", r)
	}
}
