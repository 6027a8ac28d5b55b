package dispatchtest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// RunLeasesContract states what the dispatcher's leadership relies on:
// the registry lists the queues to compete for, one owner at a time holds
// a queue's lease, at an epoch that only grows, a lease lapses or is
// released to the next owner, the lines of a queue split into lines follow
// its leader's epoch, and only a queue done with leaves the registry.
func RunLeasesContract(t *testing.T, newStore NewStoreFunc) {
	queuetest.RunContract(t, newStore, []queuetest.Case[dispatch.Store, Harness]{
		{Name: "QueuesListsTheConfiguredQueues", Run: queuesListed},
		{Name: "ConfigReadsTheKnobsAndTheLinesLengths", Run: configRead},
		{Name: "FreeLeaseIsTakenOnceAndRefusedToEveryoneElse", Run: acquireOnce},
		{Name: "RenewExtendsOnlyTheHoldersLease", Run: renewHolder},
		{Name: "LapsedLeaseGoesToTheNextOwnerAtAHigherEpoch", Run: lapsed},
		{Name: "ReleasedLeaseGoesToTheNextOwnerAtAHigherEpoch", Run: released},
		{Name: "SyncLinesCopiesTheConfigToTheLinesWithoutIt", Run: syncLines},
		{Name: "LinesFollowTheNewestLeadersEpoch", Run: follow},
		{Name: "UnregisterRemovesOnlyAQueueDoneWith", Run: unregister},
	})
}

func listed(t *testing.T, s dispatch.Store, q string) bool {
	t.Helper()
	ids, err := s.Queues(context.Background())
	if err != nil {
		t.Fatalf("queues: %v", err)
	}
	return slices.Contains(ids, q)
}

func queuesListed(t *testing.T, s dispatch.Store, h Harness) {
	q := queuetest.ID(t)
	if listed(t, s, q) {
		t.Fatalf("%s is listed before it was configured", q)
	}
	h.Configure(t, q, caseConfig(nil))
	if !listed(t, s, q) {
		t.Fatalf("%s is not listed once configured", q)
	}
}

func configRead(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, func(c *queue.Config) { c.AdmissionRatePerSec, c.MaxActive = 250, 7 })
	enter(t, h, q, 3)
	cfg, st, err := s.Config(ctx, q)
	if err != nil || cfg.AdmissionRatePerSec != 250 || cfg.MaxActive != 7 || cfg.State != queue.Open || cfg.Shards != 1 {
		t.Fatalf("config: %+v %v, want OPEN, 250/s, maxActive 7, 1 line", cfg, err)
	}
	if st.Waiting != 3 || st.Active != 0 || st.IssuedTotal != 0 || len(st.Lines) != 0 {
		t.Fatalf("stats: %+v, want 3 waiting, nothing active or issued, no lines", st)
	}
	split := newQueue(t, h, func(c *queue.Config) { c.Shards = 3 })
	enter(t, h, split, 9)
	cfg, st, err = s.Config(ctx, split)
	var sum int64
	for _, l := range st.Lines {
		sum += l.Waiting
	}
	if err != nil || cfg.Shards != 3 || st.Waiting != 9 || len(st.Lines) != 3 || sum != 9 {
		t.Fatalf("split queue: %d lines, %d waiting, line stats %+v, %v; want 3 lines, 9 waiting over them", cfg.Shards, st.Waiting, st.Lines, err)
	}
	if _, _, err := s.Config(ctx, queuetest.ID(t)); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("config of a queue never made: %v, want ErrNotFound", err)
	}
}

func acquireOnce(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q1, q2, missing := newQueue(t, h, nil), newQueue(t, h, nil), queuetest.ID(t)
	r := s.AcquireLeases(ctx, "a", []string{q1, missing, q2}, 10*time.Second)
	if r[0].Err != nil || r[0].Epoch <= 0 || !errors.Is(r[1].Err, queue.ErrNotFound) || r[2].Err != nil || r[2].Epoch <= 0 {
		t.Fatalf("a acquires [q1, a queue never made, q2]: %+v, want [epoch, ErrNotFound, epoch]", r)
	}
	for _, owner := range []string{"b", "a"} { // the holder's new attempt too
		if r := s.AcquireLeases(ctx, owner, []string{q1, q2}, 10*time.Second); r[0] != (queue.LeaseReply{}) || r[1] != (queue.LeaseReply{}) {
			t.Fatalf("%s acquires held leases: %+v, want epoch 0 for both", owner, r)
		}
	}
}

func renewHolder(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q, other := newQueue(t, h, nil), newQueue(t, h, nil)
	const ttl = time.Second
	e := lead(t, s, q, "a", ttl)
	h.Wait(t, 600*time.Millisecond)
	r := s.RenewLeases(ctx, "a", []queue.Lease{{QueueID: q, Epoch: e}, {QueueID: other, Epoch: e}}, ttl)
	if r[0].Err != nil || r[0].Epoch != e || r[1] != (queue.LeaseReply{}) {
		t.Fatalf("a renews [its lease, a lease nobody holds]: %+v, want [epoch %d, 0]", r, e)
	}
	for _, tc := range []struct {
		owner string
		epoch int64
	}{{"b", e}, {"a", e - 1}, {"a", e + 1}} {
		if r := s.RenewLeases(ctx, tc.owner, []queue.Lease{{QueueID: q, Epoch: tc.epoch}}, ttl); r[0] != (queue.LeaseReply{}) {
			t.Fatalf("%s renews %s's lease at epoch %d (the holder's is %d): %+v, want 0", tc.owner, "a", tc.epoch, e, r[0])
		}
	}
	h.Wait(t, 600*time.Millisecond) // past the first ttl, within the renewed one
	if r := s.AcquireLeases(ctx, "b", []string{q}, ttl); r[0] != (queue.LeaseReply{}) {
		t.Fatalf("b acquires the renewed lease: %+v, want 0", r[0])
	}
}

func lapsed(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, nil)
	const ttl = 300 * time.Millisecond
	ea := lead(t, s, q, "a", ttl)
	h.Wait(t, ttl+200*time.Millisecond)
	if r := s.RenewLeases(ctx, "a", []queue.Lease{{QueueID: q, Epoch: ea}}, ttl); r[0] != (queue.LeaseReply{}) {
		t.Fatalf("a renews its lapsed lease: %+v, want 0", r[0])
	}
	eb := lead(t, s, q, "b", 10*time.Second)
	if eb <= ea {
		t.Fatalf("b took the lapsed lease at epoch %d, want above a's %d", eb, ea)
	}
	if err := s.ReleaseLease(ctx, q, "a", ea); err != nil {
		t.Fatalf("a releases its lapsed lease: %v", err)
	}
	if r := s.AcquireLeases(ctx, "c", []string{q}, ttl); r[0] != (queue.LeaseReply{}) {
		t.Fatalf("c acquires after a released a lapsed lease: %+v, want 0 (b holds it)", r[0])
	}
}

func released(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, nil)
	const ttl = 10 * time.Second
	e := lead(t, s, q, "a", ttl)
	for _, tc := range []struct {
		owner string
		epoch int64
	}{{"b", e}, {"a", e - 1}, {"a", e + 1}} {
		if err := s.ReleaseLease(ctx, q, tc.owner, tc.epoch); err != nil {
			t.Fatalf("%s releases at epoch %d: %v", tc.owner, tc.epoch, err)
		}
		if r := s.AcquireLeases(ctx, "c", []string{q}, ttl); r[0] != (queue.LeaseReply{}) {
			t.Fatalf("c acquires after %s released at epoch %d (a holds %d): %+v, want 0", tc.owner, tc.epoch, e, r[0])
		}
	}
	owners := []string{"a", "b", "a", "c"}
	for i, owner := range owners[:len(owners)-1] {
		if err := s.ReleaseLease(ctx, q, owner, e); err != nil {
			t.Fatalf("%s releases at epoch %d: %v", owner, e, err)
		}
		if r := s.RenewLeases(ctx, owner, []queue.Lease{{QueueID: q, Epoch: e}}, ttl); r[0] != (queue.LeaseReply{}) {
			t.Fatalf("%s renews the lease it released: %+v, want 0", owner, r[0])
		}
		next := lead(t, s, q, owners[i+1], ttl)
		if next <= e {
			t.Fatalf("%s took the released lease at epoch %d, want above %d", owners[i+1], next, e)
		}
		e = next
	}
	if err := s.ReleaseLease(ctx, q, "a", e); err != nil { // not a's any more
		t.Fatal(err)
	}
	if r := s.RenewLeases(ctx, "c", []queue.Lease{{QueueID: q, Epoch: e}}, ttl); r[0].Epoch != e {
		t.Fatalf("c renews after a's release of a lease it no longer held: %+v, want epoch %d", r[0], e)
	}
}

func syncLines(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	split := newQueue(t, h, func(c *queue.Config) { c.Shards = 3 })
	if n, err := s.SyncLines(ctx, split); n != 0 || err != nil {
		t.Fatalf("sync the lines of a queue just configured: %d %v, want 0 (the copies are current)", n, err)
	}
	h.LoseLineCopy(t, split, 2)
	e := lead(t, s, split, "a", 10*time.Second)
	lines := []queue.LineLease{{QueueID: split, Line: 1, Epoch: e}, {QueueID: split, Line: 2, Epoch: e}}
	if r := s.FollowLeases(ctx, "a", lines); r[0].Epoch != e || !errors.Is(r[1].Err, queue.ErrNotFound) {
		t.Fatalf("follow [line 1, line 2 without its copy]: %+v, want [epoch %d, ErrNotFound]", r, e)
	}
	if n, err := s.SyncLines(ctx, split); n != 1 || err != nil {
		t.Fatalf("sync with line 2's copy lost: %d %v, want 1", n, err)
	}
	if n, err := s.SyncLines(ctx, split); n != 0 || err != nil {
		t.Fatalf("sync again: %d %v, want 0", n, err)
	}
	if r := s.FollowLeases(ctx, "a", lines); r[0].Epoch != e || r[1].Epoch != e || r[1].Err != nil {
		t.Fatalf("follow once line 2 has its copy: %+v, want epoch %d for both", r, e)
	}
	if n, err := s.SyncLines(ctx, newQueue(t, h, nil)); n != 0 || err != nil {
		t.Fatalf("sync the lines of a queue of one line: %d %v, want 0", n, err)
	}
	if _, err := s.SyncLines(ctx, queuetest.ID(t)); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("sync the lines of a queue never made: %v, want ErrNotFound", err)
	}
}

func follow(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, func(c *queue.Config) { c.Shards = 3 })
	lines := func(epoch int64) []queue.LineLease {
		return []queue.LineLease{{QueueID: q, Line: 1, Epoch: epoch}, {QueueID: q, Line: 2, Epoch: epoch}}
	}
	follows := func(owner string, epoch, want int64) {
		t.Helper()
		r := s.FollowLeases(ctx, owner, lines(epoch))
		if r[0].Err != nil || r[1].Err != nil || r[0].Epoch != want || r[1].Epoch != want {
			t.Fatalf("%s makes the lines follow epoch %d: %+v, want %d for both", owner, epoch, r, want)
		}
	}
	ea := lead(t, s, q, "a", 10*time.Second)
	follows("a", ea, ea)
	follows("a", ea, ea) // a repeat
	if err := s.ReleaseLease(ctx, q, "a", ea); err != nil {
		t.Fatal(err)
	}
	eb := lead(t, s, q, "b", 10*time.Second)
	follows("b", eb, eb)
	follows("a", ea, 0) // the ex-leader, late: a newer leader followed
	r := s.FollowLeases(ctx, "b", []queue.LineLease{{QueueID: q, Line: 3, Epoch: eb}, {QueueID: newQueue(t, h, nil), Line: 1, Epoch: eb}})
	if !errors.Is(r[0].Err, queue.ErrNotFound) || !errors.Is(r[1].Err, queue.ErrNotFound) {
		t.Fatalf("follow [line 3 of 3 lines, line 1 of a queue not split]: %+v, want ErrNotFound for both", r)
	}
}

func unregister(t *testing.T, s dispatch.Store, h Harness) {
	ctx := context.Background()
	q := newQueue(t, h, nil)
	if removed, err := s.Unregister(ctx, q); removed || err != nil || !listed(t, s, q) {
		t.Fatalf("unregister a configured queue: %v %v, listed %v; want false, still listed", removed, err, listed(t, s, q))
	}
	if removed, err := s.Unregister(ctx, queuetest.ID(t)); removed || err != nil {
		t.Fatalf("unregister a queue never made: %v %v, want false", removed, err)
	}
	h.Close(t, q)
	ea := lead(t, s, q, "a", 10*time.Second)
	if r := issue(s, q, 0, ea, nil, nil); r.Err != nil || !r.Gone {
		t.Fatalf("tick a closed queue with nobody in it: %+v, want gone", r)
	}
	if removed, err := s.Unregister(ctx, q); !removed || err != nil || listed(t, s, q) {
		t.Fatalf("unregister the queue gone: %v %v, listed %v; want true, no longer listed", removed, err, listed(t, s, q))
	}
	if removed, err := s.Unregister(ctx, q); removed || err != nil {
		t.Fatalf("unregister it again: %v %v, want false", removed, err)
	}
	if r := s.AcquireLeases(ctx, "b", []string{q}, time.Second); !errors.Is(r[0].Err, queue.ErrNotFound) {
		t.Fatalf("acquire the queue gone: %+v, want ErrNotFound", r[0])
	}
	h.Configure(t, q, caseConfig(nil)) // made again under the same id
	if !listed(t, s, q) {
		t.Fatalf("%s made again is not listed", q)
	}
	if eb := lead(t, s, q, "b", time.Second); eb <= ea {
		t.Fatalf("the queue made again is led at epoch %d, want above the old queue's %d", eb, ea)
	}
}
