package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// queueKeys lists every key of q with its PTTL.
func queueKeys(t *testing.T, c *cluster, q string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := c.rdb.Scan(ctx, 0, redisstore.KeysFor(q).Prefix()+"*", 10000).Iterator()
	for iter.Next(ctx) {
		out[iter.Val()] = c.rdb.PTTL(ctx, iter.Val()).Val()
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func listed(t *testing.T, c *cluster, q string) bool {
	t.Helper()
	ok, err := c.rdb.SIsMember(context.Background(), redisstore.QueuesKey, q).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// eventsOf returns the recorded events of one type and queue whose user is
// in users, counted per token id.
func eventsOf(c *cluster, typ, q string, users map[string]bool) (n int, perToken map[string]int) {
	perToken = map[string]int{}
	for _, e := range c.pub.of(typ) {
		if e.QueueID == q && users[e.UserID] {
			n++
			perToken[e.TokenID]++
		}
	}
	return n, perToken
}

// A closed queue must not be served forever: once its last token has
// expired and that news is relayed, the dispatcher deletes it, unlists it,
// and goes on; the same id created again is led and admits again.
func TestClosedQueueDisappearsAfterItsLastTokenAndCanComeBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second, Discovery: 200 * time.Millisecond})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionRatePerSec, cfg.TokenTTLSeconds, cfg.ActivationSpreadMs = 100, 2, 0
	})
	k := redisstore.KeysFor(q)
	const people = 5
	first := map[string]bool{}
	for i := range people {
		first[userName(i)] = true
	}
	c.fill(q, people)
	c.start(2)

	testenv.WaitFor(t, 10*time.Second, "the first five admitted", func() bool {
		n, _ := eventsOf(c, queue.EventTokenIssued, q, first)
		return n == people
	})
	if n, err := c.store.Close(ctx, q); err != nil || n != 0 {
		t.Fatalf("close: dropped %d err %v, want 0 (everyone admitted)", n, err)
	}
	closedAt := time.Now()
	testenv.WaitFor(t, 20*time.Second, "the closed queue to be unlisted", func() bool { return !listed(t, c, q) })
	t.Logf("unlisted %v after the close (token TTL 2 s)", time.Since(closedAt).Round(10*time.Millisecond))
	epoch, _ := c.rdb.HGet(ctx, k.Dispatch(), "epoch").Int64()

	// What is left expires by itself: the dispatch hash (epoch, 1 h) and
	// the five EXPIRED markers. Checked twice, a few discovery rounds
	// apart, so a relay or standby that wrote a key back would show.
	check := func(when string) {
		keys := queueKeys(t, c, q)
		want := map[string]bool{k.Dispatch(): true}
		for u := range first {
			want[k.Status(u)] = true
		}
		for key, pttl := range keys {
			if pttl <= 0 && pttl != -2 {
				t.Errorf("%s: %s has no expiry (PTTL %v)", when, key, pttl)
			}
			if !want[key] {
				t.Errorf("%s: %s survived the deletion", when, key)
			}
		}
		if len(keys) != len(want) {
			t.Errorf("%s: %d keys left, want %d (dispatch and the markers): %v", when, len(keys), len(want), keys)
		}
		if n := c.rdb.Exists(ctx, k.Lock(), k.Config(), k.Outbox()).Val(); n != 0 {
			t.Errorf("%s: %d of lock, config, outbox exist, want 0", when, n)
		}
		for u := range first {
			if m := c.rdb.Get(ctx, k.Status(u)).Val(); len(m) < 8 || m[:8] != "EXPIRED:" {
				t.Errorf("%s: %s's marker %q, want EXPIRED:<token id>", when, u, m)
			}
		}
	}
	check("at once")
	time.Sleep(time.Second) // five discovery rounds: nothing may come back
	check("a second later")
	// Done with as a closed queue should be: nothing logged at warn (it
	// once logged the step-down, and the relay's reads of the outbox
	// deleted under it, as warnings; make demo printed them).
	if w := c.warns.String(); w != "none" {
		t.Errorf("warnings while the queue was done with: %s", w)
	}
	if listed(t, c, q) {
		t.Fatal("the queue was listed again without a PUT")
	}
	issued, perIssued := eventsOf(c, queue.EventTokenIssued, q, first)
	expired, perExpired := eventsOf(c, queue.EventTokenExpired, q, first)
	if issued != people || len(perIssued) != people || expired != people || len(perExpired) != people {
		t.Fatalf("events: %d TokenIssued (%d tokens), %d TokenExpired (%d tokens); want %d of each, one per token",
			issued, len(perIssued), expired, len(perExpired), people)
	}
	for tid := range perIssued {
		if perExpired[tid] != 1 {
			t.Errorf("token %s: %d TokenExpired, want 1", tid, perExpired[tid])
		}
	}
	for i, r := range c.replicas {
		select {
		case <-r.done:
			t.Fatalf("replica %d stopped with its queue", i)
		default:
		}
	}

	// The same id again: listed, led at a later epoch (the kept epoch
	// fences the old leaders), and admitting.
	_, created, err := c.store.UpdateConfig(ctx, q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		cfg.AdmissionRatePerSec, cfg.TokenTTLSeconds, cfg.ActivationSpreadMs = 100, 60, 0
		return cfg, nil
	})
	if err != nil || !created {
		t.Fatalf("re-create: created=%v err=%v", created, err)
	}
	second := map[string]bool{}
	for i := range people {
		u := userName(100 + i)
		second[u] = true
		if _, err := c.store.Enter(ctx, q, u); err != nil {
			t.Fatal(err)
		}
	}
	recreated := time.Now()
	testenv.WaitFor(t, 15*time.Second, "the re-created queue's five admitted", func() bool {
		n, _ := eventsOf(c, queue.EventTokenIssued, q, second)
		return n == people
	})
	t.Logf("re-created queue admitted its %d people %v after the PUT", people, time.Since(recreated).Round(10*time.Millisecond))
	l := c.leader(q)
	e2, _ := c.rdb.HGet(ctx, k.Dispatch(), "epoch").Int64()
	if e2 <= epoch {
		t.Fatalf("epoch after re-creation %d, want above the deleted queue's %d", e2, epoch)
	}
	if lock := c.rdb.Get(ctx, k.Lock()).Val(); lock != fmt.Sprintf("%s:%d", l.owner, e2) {
		t.Fatalf("lock %q, want %s:%d", lock, l.owner, e2)
	}
	if !listed(t, c, q) {
		t.Fatal("re-created queue not listed")
	}
	if n, per := eventsOf(c, queue.EventTokenIssued, q, second); n != people || len(per) != people {
		t.Fatalf("re-created queue: %d TokenIssued for %d tokens, want %d", n, len(per), people)
	}
	t.Logf("first life epoch %d, second life epoch %d", epoch, e2)
}

// A queue re-created right after the dispatcher deleted it, before the
// dispatcher's next discovery round, must be led again from that round on:
// nothing the dispatcher remembers of the deleted queue (a finished worker,
// a "gone" mark) may outlive the re-creation, or nobody would ever lead the
// listed, configured queue.
func TestQueueRecreatedBeforeTheNextDiscoveryIsLedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const discovery = 3 * time.Second
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second, Discovery: discovery})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionRatePerSec, cfg.TokenTTLSeconds, cfg.ActivationSpreadMs = 100, 1, 0
	})
	c.fill(q, 1)
	c.start(1)
	testenv.WaitFor(t, 10*time.Second, "the first admission", func() bool {
		return len(c.pub.of(queue.EventTokenIssued)) == 1
	})
	if _, err := c.store.Close(ctx, q); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 15*time.Second, "the closed queue to be unlisted", func() bool { return !listed(t, c, q) })
	// At once, well inside one discovery period.
	_, created, err := c.store.UpdateConfig(ctx, q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		cfg.AdmissionRatePerSec, cfg.TokenTTLSeconds, cfg.ActivationSpreadMs = 100, 60, 0
		return cfg, nil
	})
	if err != nil || !created {
		t.Fatalf("re-create: created=%v err=%v", created, err)
	}
	recreated := time.Now()
	if _, err := c.store.Enter(ctx, q, userName(1)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 3*discovery, "the re-created queue's admission", func() bool {
		for _, e := range c.pub.of(queue.EventTokenIssued) {
			if e.UserID == userName(1) {
				return true
			}
		}
		return false
	})
	t.Logf("re-created right after being unlisted; admitting %v later (discovery every %v)",
		time.Since(recreated).Round(10*time.Millisecond), discovery)
	if n := len(c.pub.of(queue.EventTokenIssued)); n != 2 {
		t.Fatalf("%d TokenIssued, want 2 (one per life)", n)
	}
}
