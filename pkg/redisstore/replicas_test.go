package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// replicaLag is how far behind the replica is made to run: well past the
// wait, so nothing the test does while it lags can be confirmed.
const (
	replicaLag  = 3 * time.Second
	replicaWait = 200 * time.Millisecond
)

// replicated is a primary whose replica replicates through a proxy, with
// sentinels only for the tests that fail over (elsewhere a loaded machine
// stalling the primary past down-after would fail over behind the test's
// back), and two Stores on the primary that acknowledge only what the
// replica holds: two, so that a repeat can come on a connection that made
// no change (its WAIT alone would confirm nothing new).
type replicated struct {
	set     *testenv.SentinelSet
	s, s2   *redisstore.Store
	primary *redis.Client
	replica *redis.Client
}

func newReplicated(t *testing.T, sentinels bool) *replicated {
	t.Helper()
	set := testenv.StartSentinelSetWith(t, testenv.SentinelOptions{Replicas: 1, Linked: true, NoSentinels: !sentinels})
	r := &replicated{set: set, primary: set.Node(set.Primary), replica: set.Node(set.Replicas[0])}
	r.s = testenv.StoreAt(t, set.NodeURL(set.Primary))
	r.s2 = testenv.StoreAt(t, set.NodeURL(set.Primary))
	r.s.RequireReplicas(1, replicaWait)
	r.s2.RequireReplicas(1, replicaWait)
	return r
}

// lag makes the replica run replicaLag behind; caughtUp ends that and
// waits until the replica has what the primary has.
func (r *replicated) lag() { r.set.Links[0].Delay(replicaLag) }

func (r *replicated) caughtUp(t *testing.T) {
	t.Helper()
	r.set.Links[0].Delay(0)
	var want int64
	testenv.WaitFor(t, 10*time.Second, "the primary's offset", func() bool {
		var err error
		want, err = replOffset(r.primary)
		return err == nil
	})
	testenv.WaitFor(t, 10*time.Second, "the replica caught up", func() bool {
		n, err := replOffset(r.replica)
		return err == nil && n >= want
	})
}

// pause stops the replica for d (DEBUG SLEEP, in the background) and
// returns once it sleeps.
func (r *replicated) pause(t *testing.T, d time.Duration) {
	t.Helper()
	c := r.set.Node(r.set.Replicas[0])
	go c.Do(context.Background(), "debug", "sleep", d.Seconds())
	time.Sleep(50 * time.Millisecond)
}

// replOffset reads master_repl_offset from INFO replication (a replica's
// is what it has applied).
func replOffset(c *redis.Client) (int64, error) {
	return testenv.ReplOffset(context.Background(), c)
}

func notReplicated(err error) bool {
	return errors.Is(err, queue.ErrNotReplicated) && errors.Is(err, queue.ErrUnavailable)
}

// A place is acknowledged only once the replica holds it; while the
// replica lags the enter fails 503-style, and so does its repeat from a
// connection that changed nothing (without the repeat's own no-op write
// for the replicas, that WAIT would have confirmed at once).
// enterAcked enters u as a client does when told the replicas did not
// confirm in time: again (it is safe), up to 20 times, for a busy
// machine's replica can take longer than replicaWait to answer.
func enterAcked(ctx context.Context, s *redisstore.Store, q, u string) (queue.Standing, error) {
	for i := 0; ; i++ {
		st, err := s.Enter(ctx, q, u)
		if !notReplicated(err) || i == 19 {
			return st, err
		}
	}
}

func TestEnterIsAcknowledgedOnlyOnceTheReplicaHoldsIt(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, false)
	ctx := context.Background()
	q := newQueue(t, r.s, nil)
	k := redisstore.KeysFor(q)

	st, err := enterAcked(ctx, r.s, q, "u1")
	if err != nil || st.Position != 1 {
		t.Fatalf("enter u1: %+v %v", st, err)
	}
	// Acknowledged: the replica has applied it already.
	if _, err := r.replica.ZScore(ctx, k.Waiting(), "u1").Result(); err != nil {
		t.Fatalf("u1's acknowledged place is not on the replica: %v", err)
	}

	r.lag()
	if _, err := r.s.Enter(ctx, q, "u2"); !notReplicated(err) {
		t.Fatalf("enter u2 while the replica lags: %v, want ErrNotReplicated", err)
	}
	// The repeat comes on a connection that has changed nothing, while the
	// replica stops reading for a second (DEBUG SLEEP: its last
	// acknowledgement stands, and covers every offset that connection
	// wrote at).
	r.pause(t, time.Second)
	if _, err := r.s2.Enter(ctx, q, "u2"); !notReplicated(err) {
		t.Fatalf("u2's repeat from another connection while the replica lags: %v, want ErrNotReplicated", err)
	}
	if _, err := r.s2.Enter(ctx, q, "u1"); !notReplicated(err) {
		t.Fatalf("u1's refresh while the replica lags: %v, want ErrNotReplicated", err)
	}
	r.caughtUp(t)
	st, err = enterAcked(ctx, r.s2, q, "u2")
	if err != nil || st.Position != 2 {
		t.Fatalf("u2's repeat once the replica caught up: %+v %v, want position 2", st, err)
	}
	// Three calls for u2, one place: the repeats changed nothing.
	if n := r.primary.ZCard(ctx, k.Waiting()).Val(); n != 2 {
		t.Fatalf("%d waiting on the primary, want 2", n)
	}
	if n, _ := r.primary.Get(ctx, k.Seq()).Int64(); n != 2 {
		t.Fatalf("seq %d, want 2", n)
	}
	if n := r.replica.ZCard(ctx, k.Waiting()).Val(); n != 2 {
		t.Fatalf("%d waiting on the replica, want 2", n)
	}
}

// A consumed token, a restored one and a lease grant are acknowledged only
// once the replica holds them, repeats included.
func TestConsumeRestoreAndLeaseWaitForTheReplica(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, false)
	ctx := context.Background()
	q := newQueue(t, r.s, nil)
	grantToken(t, r.primary, q, "buyer", "secret-1", "tid-1", time.Minute)
	r.caughtUp(t)

	r.lag()
	// Not confirmed, but taken on the primary: the caller learns which
	// token, to hand it back at once.
	if c, err := r.s.Consume(ctx, q, "buyer", "secret-1", "order-1", 30*time.Second, time.Second); !notReplicated(err) || c.TokenID != "tid-1" {
		t.Fatalf("consume while the replica lags: %+v %v, want ErrNotReplicated with tid-1", c, err)
	}
	if _, err := r.s2.Consume(ctx, q, "buyer", "secret-1", "order-1", 30*time.Second, time.Second); !notReplicated(err) {
		t.Fatalf("consume's repeat while the replica lags: %v, want ErrNotReplicated", err)
	}
	r.caughtUp(t)
	c, err := r.s2.Consume(ctx, q, "buyer", "secret-1", "order-1", 30*time.Second, time.Second)
	if err != nil || c.TokenID != "tid-1" {
		t.Fatalf("consume's repeat once caught up: %+v %v, want tid-1", c, err)
	}

	r.lag()
	if _, err := r.s.Restore(ctx, q, "buyer", "tid-1", "order-1", true); !notReplicated(err) {
		t.Fatalf("restore while the replica lags: %v, want ErrNotReplicated", err)
	}
	if _, err := r.s2.Restore(ctx, q, "buyer", "tid-1", "order-1", true); !notReplicated(err) {
		t.Fatalf("restore's redelivery while the replica lags: %v, want ErrNotReplicated", err)
	}
	r.caughtUp(t)
	if out, err := r.s2.Restore(ctx, q, "buyer", "tid-1", "order-1", true); err != nil || out != queue.Duplicate {
		t.Fatalf("restore's redelivery once caught up: %s %v, want DUPLICATE", out, err)
	}
	if tok, _, _ := redisstore.ParseTokenMarker(r.replica.Get(ctx, redisstore.KeysFor(q).Status("buyer")).Val()); tok.ID != "tid-1" {
		t.Fatalf("the restored token on the replica: %q, want tid-1", tok.ID)
	}

	r.lag()
	if e, err := r.s.AcquireLease(ctx, q, "leader", 10*time.Second); !notReplicated(err) || e != 0 {
		t.Fatalf("lease grant while the replica lags: epoch %d %v, want ErrNotReplicated", e, err)
	}
	r.caughtUp(t)
	// The grant was made on the primary: the lease is held until it runs
	// out, by nobody who was told so.
	if e, err := r.s2.AcquireLease(ctx, q, "other", 10*time.Second); err != nil || e != 0 {
		t.Fatalf("another owner's acquire: epoch %d %v, want 0 (held)", e, err)
	}
}

// The relay publishes an admission only once the replica holds it.
func TestOutboxEventsAreConfirmedOnTheReplicaBeforePublishing(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, false)
	ctx := context.Background()
	q := newQueue(t, r.s, func(c *queue.Config) { c.AdmissionRatePerSec, c.ActivationSpreadMs = 1000, 0 })
	for _, u := range []string{"a", "b", "c"} {
		// Confirmed, however slow the replica's answer on a loaded
		// machine (an enter is safe to send again).
		testenv.WaitFor(t, 10*time.Second, "enter confirmed", func() bool {
			_, err := r.s.Enter(ctx, q, u)
			if err != nil && !notReplicated(err) {
				t.Fatal(err)
			}
			return err == nil
		})
	}
	if err := r.s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	epoch := lead(t, r.s, q, "leader")
	r.lag()
	issued := 0
	testenv.WaitFor(t, 10*time.Second, "three admitted", func() bool {
		res, err := r.s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: grants(t, 3)})
		if err != nil {
			t.Fatalf("tick: %v", err)
		}
		issued += res.Issued
		return issued == 3
	})
	read := func() []queue.OutboxBatch {
		b, err := r.s2.ReadOutboxes(ctx, "relay-1", 100, []queue.OutboxRead{{QueueID: q, Pending: true}})
		if err != nil || b[0].Err != nil {
			t.Fatalf("read outbox: %v %v", err, b)
		}
		return b
	}
	if b, err := r.s2.ReadOutboxes(ctx, "relay-1", 100, []queue.OutboxRead{{QueueID: q}}); err != nil || len(b[0].Events) != 3 {
		t.Fatalf("read outbox: %v %+v", err, b)
	}
	// A re-read of the pending events (what a relay does after a failed
	// round) changes nothing on the primary: the touch in OutboxReplicated
	// is what the WAIT waits for.
	batches := read()
	if len(batches[0].Events) != 3 {
		t.Fatalf("pending events: %d, want 3", len(batches[0].Events))
	}
	if err := r.s2.OutboxReplicated(ctx, batches); !notReplicated(err) {
		t.Fatalf("outbox confirmed while the replica lags: %v, want ErrNotReplicated", err)
	}
	r.caughtUp(t)
	if err := r.s2.OutboxReplicated(ctx, read()); err != nil {
		t.Fatalf("outbox once caught up: %v", err)
	}
	if n := len(outbox(t, r.replica, q)); n != 3 {
		t.Fatalf("%d events on the replica, want 3", n)
	}

	// Read from a primary a failover then replaced: the relay's client
	// asks the new primary, which lacks an event read (here: deleted), and
	// whose replicas would confirm at once. Not confirmed.
	batches = read()
	k := redisstore.KeysFor(q)
	if n := r.primary.XDel(ctx, k.Outbox(), batches[0].Events[2].StreamID).Val(); n != 1 {
		t.Fatalf("XDEL: %d", n)
	}
	if err := r.s2.OutboxReplicated(ctx, batches); !notReplicated(err) {
		t.Fatalf("outbox with an event the primary does not hold: %v, want ErrNotReplicated", err)
	}
	// An event of the same entry id with another event id is not it either.
	batches = read()
	batches[0].Events[len(batches[0].Events)-1].ID = "someone-else.issued"
	if err := r.s2.OutboxReplicated(ctx, batches); !notReplicated(err) {
		t.Fatalf("outbox with an entry id holding another event: %v, want ErrNotReplicated", err)
	}
}

// A new epoch is above the last one even when the last grant was lost (a
// failover to a replica that missed it: simulated by putting the previous
// epoch back and dropping the lock): it is at least the Redis TIME in ms.
func TestEpochNeverGoesBackWhenTheLastGrantIsLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, nil)
	k := redisstore.KeysFor(q)
	e1 := lead(t, s, q, "a")
	if err := rdb.Del(ctx, k.Lock()).Err(); err != nil {
		t.Fatal(err)
	}
	e2 := lead(t, s, q, "b")
	if e2 <= e1 {
		t.Fatalf("second epoch %d, want above %d", e2, e1)
	}
	// The failover loses b's grant: the dispatch hash says e1 again.
	if err := rdb.HSet(ctx, k.Dispatch(), "epoch", e1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, k.Lock()).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // a grant a millisecond later at least
	e3 := lead(t, s, q, "c")
	if e3 <= e2 {
		t.Fatalf("epoch after the lost grant %d, want above the lost %d", e3, e2)
	}
	// b, fenced by its lost epoch, cannot issue.
	if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: e2, Tick: time.Second, Grants: grants(t, 1)}); !errors.Is(err, queue.ErrStaleEpoch) {
		t.Fatalf("issue at the lost epoch: %v, want ErrStaleEpoch", err)
	}
}

// A failover to a replica that is behind loses no acknowledged place and
// hands out no epoch twice. Enters run through the Sentinel URL while the
// replica lags; the primary is killed and its link to the replica cut at
// once, so what the replica had not received is gone. Every enter that was
// acknowledged must be on the new primary, and the epoch granted (and
// acknowledged) before the failover stays below any granted after it.
func TestFailoverToALaggingReplicaLosesNoAcknowledgedPlace(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, true)
	ctx := context.Background()
	q := newQueue(t, r.s, func(c *queue.Config) { c.MaxQueueSize = 100_000 })
	s := testenv.StoreAt(t, r.set.URL) // through the sentinels
	s.RequireReplicas(1, replicaWait)
	epoch, err := s.AcquireLease(ctx, q, "old-leader", 2*time.Second)
	if err != nil || epoch <= 0 {
		t.Fatalf("lease before the failover: %d %v", epoch, err)
	}

	const workers = 8
	type result struct {
		acked  []string
		failed int
	}
	results := make([]result, workers)
	stop := make(chan struct{})
	done := make(chan struct{}, workers)
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := fmt.Sprintf("w%d-%05d", w, i)
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := s.Enter(cctx, q, u)
				cancel()
				if err == nil {
					results[w].acked = append(results[w].acked, u)
				} else if !errors.Is(err, queue.ErrUnavailable) {
					results[w].failed++
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // acknowledged enters while in sync
	r.lag()
	time.Sleep(time.Second) // enters now wait for a replica 1.5 s behind
	r.set.Kill(r.set.Primary)
	r.set.Links[0].Cut()
	testenv.WaitFor(t, 30*time.Second, "the sentinels promoted the replica", func() bool {
		return r.set.Master(ctx) == r.set.Replicas[0]
	})
	promoted := time.Now()
	// Enters go on against the new primary (no replica now: not acknowledged).
	time.Sleep(500 * time.Millisecond)
	close(stop)
	for range workers {
		<-done
	}

	newPrimary := r.set.Node(r.set.Replicas[0])
	k := redisstore.KeysFor(q)
	acked, lost := 0, 0
	for w := range workers {
		if results[w].failed > 0 {
			t.Errorf("worker %d: %d enters failed with an error that is not 'unavailable'", w, results[w].failed)
		}
		for _, u := range results[w].acked {
			acked++
			if _, err := newPrimary.ZScore(ctx, k.Waiting(), u).Result(); err != nil {
				lost++
			}
		}
	}
	t.Logf("acknowledged places %d, lost %d; promoted %s", acked, lost, promoted.Format(time.RFC3339Nano))
	if acked < workers {
		t.Fatalf("only %d acknowledged enters: the drill did not run", acked)
	}
	if lost != 0 {
		t.Fatalf("%d of %d acknowledged places lost in the failover", lost, acked)
	}
	// The acknowledged grant survived: nobody else can take the lease or
	// its epoch; once it runs out, the next epoch is higher.
	if got, _ := newPrimary.HGet(ctx, k.Dispatch(), "epoch").Int64(); got != epoch {
		t.Fatalf("epoch on the new primary %d, want the acknowledged %d", got, epoch)
	}
	np := testenv.StoreAt(t, r.set.NodeURL(r.set.Replicas[0]))
	testenv.WaitFor(t, 10*time.Second, "a new lease", func() bool {
		e, err := np.AcquireLease(ctx, q, "new-leader", 2*time.Second)
		if err != nil {
			t.Fatalf("lease after the failover: %v", err)
		}
		if e != 0 && e <= epoch {
			t.Fatalf("epoch after the failover %d, not above %d", e, epoch)
		}
		return e > epoch
	})
}

// Two dispatchers never issue in the same epoch, with a failover faster
// than the lease (10 s here, the failover about 2.5 s). The leader's grant
// was acknowledged: on the new primary its lock still holds, nobody else
// takes it, and the leader goes on issuing at its epoch. Another owner's
// grant made while the replica lagged was not acknowledged (so it never
// led); the failover loses it, and the epoch granted after is still above
// it: that owner's ticks are refused as stale.
func TestTwoLeadersNeverShareAnEpochAcrossAFailoverFasterThanTheLease(t *testing.T) {
	t.Parallel()
	r := newReplicated(t, true)
	ctx := context.Background()
	a := newQueue(t, r.s, func(c *queue.Config) { c.AdmissionRatePerSec, c.ActivationSpreadMs = 1000, 0 })
	b := newQueue(t, r.s, func(c *queue.Config) { c.AdmissionRatePerSec, c.ActivationSpreadMs = 1000, 0 })
	for _, q := range []string{a, b} {
		for _, u := range []string{"u1", "u2", "u3"} {
			if _, err := r.s.Enter(ctx, q, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	const lease = 10 * time.Second
	ea, err := r.s.AcquireLease(ctx, a, "leader-a", lease)
	if err != nil || ea <= 0 {
		t.Fatalf("a's grant: %d %v", ea, err)
	}
	r.lag()
	if e, err := r.s.AcquireLease(ctx, b, "leader-b", lease); !notReplicated(err) || e != 0 {
		t.Fatalf("b's grant while the replica lags: %d %v, want ErrNotReplicated", e, err)
	}
	lostB, _ := r.primary.HGet(ctx, redisstore.KeysFor(b).Dispatch(), "epoch").Int64()
	if lostB <= 0 {
		t.Fatalf("b's unacknowledged epoch on the old primary: %d", lostB)
	}
	failedAt := time.Now()
	r.set.Kill(r.set.Primary)
	r.set.Links[0].Cut()
	testenv.WaitFor(t, 30*time.Second, "the sentinels promoted the replica", func() bool {
		return r.set.Master(ctx) == r.set.Replicas[0]
	})
	took := time.Since(failedAt)
	if took >= lease {
		t.Fatalf("the failover took %s, not faster than the %s lease", took, lease)
	}
	np := testenv.StoreAt(t, r.set.NodeURL(r.set.Replicas[0]))

	// a: still led by leader-a at ea; nobody else gets it.
	if e, err := np.AcquireLease(ctx, a, "usurper", lease); err != nil || e != 0 {
		t.Fatalf("another owner's acquire of a after the failover: %d %v, want 0 (held)", e, err)
	}
	if ok, err := np.RenewLease(ctx, a, "leader-a", ea, lease); err != nil || !ok {
		t.Fatalf("leader-a's renew after the failover: %v %v", ok, err)
	}
	issued := 0
	testenv.WaitFor(t, 10*time.Second, "leader-a issues on the new primary", func() bool {
		res, err := np.Issue(ctx, a, queue.IssueRequest{Epoch: ea, Tick: time.Second, Grants: grants(t, 3)})
		if err != nil {
			t.Fatalf("leader-a's tick at epoch %d after the failover: %v", ea, err)
		}
		issued += res.Issued
		return issued > 0
	})

	// b: the lost grant's epoch is gone; the next one is above it.
	eb, err := np.AcquireLease(ctx, b, "leader-b2", lease)
	if err != nil || eb <= lostB {
		t.Fatalf("b's grant after the failover: %d %v, want above the lost %d", eb, err, lostB)
	}
	if _, err := np.Issue(ctx, b, queue.IssueRequest{Epoch: lostB, Tick: time.Second, Grants: grants(t, 1)}); !errors.Is(err, queue.ErrStaleEpoch) {
		t.Fatalf("a tick at the lost epoch %d: %v, want ErrStaleEpoch", lostB, err)
	}
	t.Logf("failover in %s; a kept epoch %d and issued %d; b's lost epoch %d, next %d", took.Round(time.Millisecond), ea, issued, lostB, eb)
}

// AllReplicas waits for every replica the primary has streaming: with one
// of two behind, nothing is acknowledged (a fixed count of one would be,
// by the other); once that replica drops off, the one left suffices.
func TestAllReplicasWaitsForEveryReplicaStreaming(t *testing.T) {
	t.Parallel()
	set := testenv.StartSentinelSet(t, 2, true)
	ctx := context.Background()
	all := testenv.StoreAt(t, set.NodeURL(set.Primary))
	all.RequireReplicas(redisstore.AllReplicas, replicaWait)
	one := testenv.StoreAt(t, set.NodeURL(set.Primary))
	one.RequireReplicas(1, replicaWait)
	q := newQueue(t, all, nil)

	if _, err := all.Enter(ctx, q, "u1"); err != nil {
		t.Fatalf("enter with both replicas in step: %v", err)
	}
	set.Links[0].DelayReplication(replicaLag)
	set.Links[0].Delay(replicaLag)
	if _, err := all.Enter(ctx, q, "u2"); !notReplicated(err) {
		t.Fatalf("enter with one of two replicas behind, waiting for all: %v, want ErrNotReplicated", err)
	}
	if _, err := one.Enter(ctx, q, "u3"); err != nil {
		t.Fatalf("enter with one of two replicas behind, waiting for one: %v", err)
	}
	// The lagging replica drops off: the primary no longer counts it, and
	// the one left is every replica streaming.
	set.Links[0].Cut()
	testenv.WaitFor(t, 10*time.Second, "enters acknowledged by the replica left", func() bool {
		_, err := all.Enter(ctx, q, "u4")
		return err == nil
	})
	primary := set.Node(set.Primary)
	if n := primary.ZCard(ctx, redisstore.KeysFor(q).Waiting()).Val(); n != 4 {
		t.Fatalf("%d waiting, want 4", n)
	}
}
