package dispatchtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// RunOutboxContract states what the relay relies on from a queue's outbox:
// it holds exactly the events the ticks wrote, in order, from before its
// group was made; a read delivers each event once, and a consumer's
// events stay pending for it (re-read on demand) until acknowledged, when
// they are gone; another consumer claims them only once they sat idle;
// and consumers left with nothing pending are pruned once idle.
func RunOutboxContract(t *testing.T, newStore NewStoreFunc) {
	queuetest.RunContract(t, newStore, []queuetest.Case[dispatch.Store, Harness]{
		{Name: "ReadWithoutTheGroupFails", Run: noGroup},
		{Name: "GroupReadsEverythingWrittenBeforeIt", Run: groupFromStart},
		{Name: "ReadDeliversEachEventOnceAndPendingReReadsTheUnacknowledged", Run: readOnce},
		{Name: "AckDeletesExactlyTheAcknowledged", Run: ackDeletes},
		{Name: "ClaimTakesOnlyEventsIdleForTheMinimum", Run: claimIdle},
		{Name: "ReplicatedConfirmsWhatWasRead", Run: replicated},
		{Name: "PruneDeletesIdleConsumersWithNothingPending", Run: prune},
		{Name: "ATicksAdmittedAreOneEntry", Run: oneEntryATick},
	})
}

// withEvents makes a queue whose outbox holds n TokenIssued events, one
// per person admitted, in n entries (a tick each), and returns it with the
// people in order.
func withEvents(t *testing.T, s dispatch.Store, h Harness, n int) (string, []string) {
	t.Helper()
	q := newQueue(t, h, nil)
	people := enter(t, h, q, n)
	e := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, e, nil)
	for i := range n {
		h.Wait(t, settle)
		if r := mustIssue(t, s, q, e, grants(t, 1)); r.Issued != 1 {
			t.Fatalf("tick %d issued %d, want 1", i, r.Issued)
		}
	}
	return q, people
}

// A tick's admitted are one entry: one read of one entry delivers them
// all, in order, under one stream id; the length counts them; one
// acknowledgement (and again) takes them all.
func oneEntryATick(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, nil)
	people := enter(t, h, q, 5)
	e := lead(t, s, q, "a", 10*time.Second)
	mustIssue(t, s, q, e, nil)
	h.Wait(t, settle)
	if r := mustIssue(t, s, q, e, grants(t, 5)); r.Issued != 5 {
		t.Fatalf("issued %d, want 5", r.Issued)
	}
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	if n, err := s.OutboxLens(ctx, []string{q}); err != nil || n[q] != 5 {
		t.Fatalf("outbox length %v %v, want 5", n, err)
	}
	evs := read(t, s, q, "r", 1, false)
	if ids := slices.Compact(streamIDs(evs)); !slices.Equal(users(evs), people) || len(ids) != 1 {
		t.Fatalf("a read of one entry: %v in entries %v, want %v in one", users(evs), ids, people)
	}
	for range 2 {
		if err := s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: evs}}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.OutboxLens(ctx, []string{q}); err != nil || n[q] != 0 {
			t.Fatalf("outbox length after the ack %v %v, want 0", n, err)
		}
	}
}

// read is one read of q's outbox by consumer: new events, or its pending
// ones again.
func read(t *testing.T, s dispatch.Store, q, consumer string, count int64, pending bool) []queue.Event {
	t.Helper()
	b, err := s.ReadOutboxes(context.Background(), consumer, count, []queue.OutboxRead{{QueueID: q, Pending: pending}})
	if err != nil || b[0].Err != nil || b[0].QueueID != q {
		t.Fatalf("%s reads %s (pending %v): %+v %v", consumer, q, pending, b, err)
	}
	return b[0].Events
}

func streamIDs(evs []queue.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.StreamID
	}
	return out
}

func noGroup(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, _ := withEvents(t, s, h, 2)
	b, err := s.ReadOutboxes(ctx, "r", 10, []queue.OutboxRead{{QueueID: q}})
	if err == nil || len(b) != 1 || b[0].Err == nil {
		t.Fatalf("the only read, of an outbox without its group: %+v %v, want the read and the call failed", b, err)
	}
	missing := queuetest.ID(t)
	if err := s.EnsureOutboxGroup(ctx, missing); err != nil {
		t.Fatalf("group of a queue never made: %v, want nothing done", err)
	}
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	b, err = s.ReadOutboxes(ctx, "r", 10, []queue.OutboxRead{{QueueID: q}, {QueueID: missing}})
	if err != nil || len(b) != 2 || b[0].Err != nil || len(b[0].Events) != 2 || b[1].QueueID != missing || b[1].Err == nil {
		t.Fatalf("read [a grouped outbox, one of a queue never made]: %+v %v, want 2 events and a failed read", b, err)
	}
	if b, err := s.ReadOutboxes(ctx, "r", 10, nil); err != nil || len(b) != 0 {
		t.Fatalf("read nothing: %+v %v", b, err)
	}
	if _, err := s.ClaimOutbox(ctx, missing, "r", 0, 10); err == nil {
		t.Fatal("claim of an outbox without its group: no error")
	}
	if _, err := s.PruneOutboxConsumers(ctx, missing, "r", 0); err == nil {
		t.Fatal("prune of an outbox without its group: no error")
	}
}

func groupFromStart(t *testing.T, s dispatch.Store, h Harness) {
	q, people := withEvents(t, s, h, 3)
	for range 2 { // a second time changes nothing
		if err := s.EnsureOutboxGroup(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	if evs := read(t, s, q, "r", 10, false); !slices.Equal(users(evs), people) {
		t.Fatalf("read %v, want the events written before the group, in order: %v", users(evs), people)
	}
}

func readOnce(t *testing.T, s dispatch.Store, h Harness) {
	q, people := withEvents(t, s, h, 5)
	if err := s.EnsureOutboxGroup(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		consumer string
		count    int64
		pending  bool
		want     []string
	}{
		{"a", 2, false, people[:2]},
		{"a", 10, false, people[2:]},
		{"a", 10, false, nil},
		{"b", 10, false, nil},
		{"a", 10, true, people},
		{"a", 2, true, people[:2]},
		{"b", 10, true, nil},
		{"a", 0, true, people}, // 0: no limit
	} {
		if got := users(read(t, s, q, step.consumer, step.count, step.pending)); !slices.Equal(got, step.want) && len(got)+len(step.want) > 0 {
			t.Fatalf("%s reads up to %d (pending %v): %v, want %v", step.consumer, step.count, step.pending, got, step.want)
		}
	}
}

func ackDeletes(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, people := withEvents(t, s, h, 5)
	other, _ := withEvents(t, s, h, 2)
	for _, id := range []string{q, other} {
		if err := s.EnsureOutboxGroup(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	evs, others := read(t, s, q, "r", 10, false), read(t, s, other, "r", 10, false)
	lens := func(want map[string]int64) {
		t.Helper()
		missing := queuetest.ID(t)
		got, err := s.OutboxLens(ctx, []string{q, other, missing})
		want[missing] = 0
		if err != nil || len(got) != 3 || got[q] != want[q] || got[other] != want[other] || got[missing] != 0 {
			t.Fatalf("outbox lengths: %v %v, want %v", got, err, want)
		}
	}
	lens(map[string]int64{q: 5, other: 2})
	// Reading acknowledges nothing; two queues' events in one call.
	err := s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: evs[:2]}, {QueueID: other, Events: others}, {QueueID: q}})
	if err != nil {
		t.Fatal(err)
	}
	lens(map[string]int64{q: 3, other: 0})
	if got := read(t, s, q, "r", 10, true); !slices.Equal(streamIDs(got), streamIDs(evs[2:])) || !slices.Equal(users(got), people[2:]) {
		t.Fatalf("pending after acknowledging two: %v, want the other three", users(got))
	}
	for range 2 { // acknowledging again changes nothing
		if err := s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: evs}}); err != nil {
			t.Fatal(err)
		}
		lens(map[string]int64{q: 0, other: 0})
	}
	if got := read(t, s, q, "r", 10, true); len(got) != 0 {
		t.Fatalf("pending after acknowledging everything: %v, want none", users(got))
	}
}

func claimIdle(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, people := withEvents(t, s, h, 3)
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	const minIdle = 500 * time.Millisecond
	claims := func(consumer string, want []string) {
		t.Helper()
		evs, err := s.ClaimOutbox(ctx, q, consumer, minIdle, 10)
		if got := users(evs); err != nil || (!slices.Equal(got, want) && len(got)+len(want) > 0) {
			t.Fatalf("%s claims what sat for %v: %v %v, want %v", consumer, minIdle, got, err, want)
		}
	}
	evs := read(t, s, q, "a", 10, false)
	claims("b", nil) // just read
	h.Wait(t, minIdle+200*time.Millisecond)
	read(t, s, q, "a", 10, true) // a re-read starts their idle time over
	claims("b", nil)
	h.Wait(t, minIdle+200*time.Millisecond)
	claims("b", people)
	if got := read(t, s, q, "a", 10, true); len(got) != 0 {
		t.Fatalf("a's pending after b claimed them: %v, want none", users(got))
	}
	if got := read(t, s, q, "b", 10, true); !slices.Equal(streamIDs(got), streamIDs(evs)) {
		t.Fatalf("b's pending: %v, want the events a read: %v", streamIDs(got), streamIDs(evs))
	}
	claims("a", nil) // b's own now, and not idle
	if err := s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: evs}}); err != nil {
		t.Fatal(err)
	}
	h.Wait(t, minIdle+200*time.Millisecond)
	claims("a", nil) // acknowledged: nothing left to claim
}

func replicated(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, _ := withEvents(t, s, h, 2)
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	evs := read(t, s, q, "r", 10, false)
	if err := s.OutboxReplicated(ctx, []queue.OutboxBatch{{QueueID: q, Events: evs}}); err != nil {
		t.Fatalf("replicated, of events just read: %v", err)
	}
	if err := s.OutboxReplicated(ctx, nil); err != nil {
		t.Fatalf("replicated, of nothing: %v", err)
	}
}

func prune(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, _ := withEvents(t, s, h, 3)
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	holding := read(t, s, q, "holding", 1, false) // keeps one pending
	done := read(t, s, q, "done", 10, false)
	if err := s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: done}}); err != nil {
		t.Fatal(err)
	}
	read(t, s, q, "self", 10, true)
	const idle = 300 * time.Millisecond
	prunes := func(want int) {
		t.Helper()
		if n, err := s.PruneOutboxConsumers(ctx, q, "self", idle); n != want || err != nil {
			t.Fatalf("prune consumers idle for %v: %d %v, want %d", idle, n, err, want)
		}
	}
	prunes(0) // nobody idle yet
	h.Wait(t, idle+200*time.Millisecond)
	prunes(1) // "done": not self, nothing pending
	prunes(0)
	if got := read(t, s, q, "holding", 10, true); !slices.Equal(streamIDs(got), streamIDs(holding)) {
		t.Fatalf("the pending of the consumer not pruned: %v, want %v", streamIDs(got), streamIDs(holding))
	}
}
