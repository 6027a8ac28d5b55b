package redisstore_test

// Requests that reach Redis late: held on the way (a slow link, a failover)
// past the client's read timeout, so go-redis has sent the command again on
// another connection, been answered, and the caller has acted on the answer
// (run the next tick, answered the buyer, given the lease up). The late copy
// must change nothing. retry_test.go covers the other case, a reply that
// comes late to a request that arrived in time.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const (
	// lateRounds is how many delayed ticks the issue test goes through;
	// the finding was 5.
	lateRounds = 5
	// lateBy holds a request past the client's 1 s read timeout but, for a
	// tick, not past its retry: the retry applies the tick, the late copy
	// arrives after the next tick.
	lateBy = 1600 * time.Millisecond
	// lateAfterGivingUp holds both tries of a call (1 s each) and a little
	// more: both copies arrive after the caller gave up.
	lateAfterGivingUp = 3 * time.Second
)

// waitDelivered waits until the proxy has passed n delayed requests on to
// Redis (and the script has had its moment to run).
func waitDelivered(t *testing.T, p *testenv.Proxy, n int) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("%d delayed requests delivered", n), func() bool {
		return p.DelayedDone() >= n
	})
	time.Sleep(100 * time.Millisecond)
}

// A tick request held on the way arrives after its retry was applied and
// after the next tick: refused, so its grants are not handed out a second
// time (the finding: 5 held ticks put 6 token id/secret pairs on two users
// each). Checked after every round over everything issued.
func TestLateIssueRequestIsRefused(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	const entered, perTick = 400, 20
	fill(t, s, q, entered)
	epoch := lead(t, s, q, "leader")
	tick := func(st *redisstore.Store) (queue.IssueResult, error) {
		return st.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, perTick)})
	}
	// The leader's ticks all go through one Store (one tick counter), as a
	// dispatcher's do; the first only starts the clock.
	if _, err := tick(ps); err != nil {
		t.Fatal(err)
	}
	match := requestWith(scriptHash(t, "issue"), k.Dispatch())
	total := 0
	for round := range lateRounds {
		time.Sleep(30 * time.Millisecond) // credit for the next ticks
		p.DelayRequests(match, lateBy, 1)
		start := time.Now()
		a, err := tick(ps)
		if err != nil {
			t.Fatalf("round %d: the delayed tick's retry: %v", round, err)
		}
		if took := time.Since(start); took < heldAtLeast {
			t.Fatalf("round %d: the delayed tick answered after %v: not by its retry", round, took)
		}
		b, err := tick(ps)
		if err != nil {
			t.Fatalf("round %d: the next tick: %v", round, err)
		}
		if a.Issued < 1 || b.Issued < 1 {
			t.Fatalf("round %d: ticks issued %d and %d, want some each", round, a.Issued, b.Issued)
		}
		total += a.Issued + b.Issued
		waitDelivered(t, p, round+1)
		checkIssuedOnce(t, rdb, q, total, entered)
	}
	t.Logf("%d delayed ticks: %d tokens issued, each once; %d late copies refused", lateRounds, total, p.DelayedDone())
}

// Both tries of a consume are held until after the order-service gave up
// (and answered the buyer 503): the late copies are refused, the token is
// still the buyer's, and their own retry consumes it. Applied, the late
// copy would hold the token for an order nobody places until the lease ran
// out, and the buyer's retry would be refused.
func TestLateConsumeIsRefused(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	us := userIDs(3)
	tokens := admitAll(t, s, rdb, q, us)
	hash := scriptHash(t, "consume")
	for round, u := range us {
		tok := tokens[u]
		tid := tok[redisstore.TokenFieldID]
		p.DelayRequests(requestWith(hash, k.Status(u)), lateAfterGivingUp, 2)
		_, err := ps.Consume(ctx, q, u, tok[redisstore.TokenFieldSecret], "gave-up", 30*time.Second, 5*time.Second)
		if err == nil {
			t.Fatalf("round %d: a consume whose both tries were held answered in time", round)
		}
		waitDelivered(t, p, 2*(round+1))
		if held := tokenFields(t, rdb, q, u); held[redisstore.TokenFieldID] != tid || held[redisstore.TokenFieldSecret] != tok[redisstore.TokenFieldSecret] {
			t.Fatalf("round %d: token %v after the late consumes, want %s's still held", round, held, tid)
		}
		if n := rdb.ZCard(ctx, k.Inflight()).Val(); n != int64(round) {
			t.Fatalf("round %d: %d in flight after the late consumes, want %d", round, n, round)
		}
		c, err := s.Consume(ctx, q, u, tok[redisstore.TokenFieldSecret], fmt.Sprintf("order-%d", round), 30*time.Second, 5*time.Second)
		if err != nil || c.TokenID != tid {
			t.Fatalf("round %d: the buyer's own retry: %+v %v, want token %s", round, c, err, tid)
		}
	}
	t.Logf("%d consumes given up on: %d late copies refused, every buyer's retry consumed", len(us), p.DelayedDone())
}

// A restore is fenced by the order it restores, not by time: a late copy
// (its OrderFailed was redelivered and restored meanwhile, and the buyer
// consumed the token again for a new order) finds another order's marker
// and does nothing.
func TestLateRestoreLeavesTheNewOrderAlone(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	u := userIDs(1)[0]
	tok := admitAll(t, s, rdb, q, []string{u})[u]
	tid, secret := tok[redisstore.TokenFieldID], tok[redisstore.TokenFieldSecret]
	if _, err := s.Consume(ctx, q, u, secret, "order-a", 30*time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.DelayRequests(requestWith(scriptHash(t, "restore"), k.Consumed(u)), lateAfterGivingUp, 2)
	if _, err := ps.Restore(ctx, q, u, tid, "order-a", true); err == nil {
		t.Fatal("a restore whose both tries were held answered in time")
	}
	// The redelivered OrderFailed restores; the buyer orders again.
	if out, err := s.Restore(ctx, q, u, tid, "order-a", true); err != nil || out != queue.Restored {
		t.Fatalf("redelivered restore: %s %v", out, err)
	}
	if _, err := s.Consume(ctx, q, u, secret, "order-b", 30*time.Second, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	waitDelivered(t, p, 2)
	if m := rdb.Get(ctx, k.Status(u)).Val(); m != redisstore.StatusOrdering+":"+tid+":order-b" {
		t.Fatalf("marker %q after the late restores, want ORDERING:%s:order-b", m, tid)
	}
	if in := rdb.ZRange(ctx, k.Inflight(), 0, -1).Val(); len(in) != 1 || !strings.HasPrefix(in[0], tid+":") {
		t.Fatalf("in flight %v after the late restores, want the one entry of order-b", in)
	}
	restored := 0
	for _, m := range outbox(t, rdb, q) {
		if m.Values["type"] == queue.EventTokenRestored {
			restored++
		}
	}
	if _, held, _ := heldToken(t, rdb, q, u); restored != 1 || held {
		t.Fatalf("%d TokenRestored and token held %v; want 1 and none (order-b holds it)", restored, held)
	}
}

// An acquire whose both tries are held until the dispatcher gave up takes
// nothing when it lands: the lease stays free and the owner's next attempt
// (a new attempt id) takes it. Applied, the late copy would hold the lease
// for an attempt nobody waits for, and the next one would be answered
// "held" until the lease ran out.
func TestLateAcquireIsRefused(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	p.DelayRequests(requestWith(scriptHash(t, "lease"), k.Lock(), respBulk("acquire")), lateAfterGivingUp, 2)
	if _, err := ps.AcquireLease(ctx, q, "owner", 10*time.Second); err == nil {
		t.Fatal("an acquire whose both tries were held answered in time")
	}
	waitDelivered(t, p, 2)
	if n := rdb.Exists(ctx, k.Lock()).Val(); n != 0 {
		t.Fatalf("lock %q after the late acquires, want none", rdb.Get(ctx, k.Lock()).Val())
	}
	epoch, err := ps.AcquireLease(ctx, q, "owner", 10*time.Second)
	if err != nil || epoch <= 0 {
		t.Fatalf("the owner's next attempt: epoch %d %v, want an epoch", epoch, err)
	}
}

// A renewal whose both tries are held until the leader gave up does not
// stretch the lease when it lands: it still ends when the leader, having
// heard nothing, counts it lost.
func TestLateRenewDoesNotStretchTheLease(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	p, ps := proxiedStore(t)
	q := retryQueue(t, s)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	epoch, err := s.AcquireLease(ctx, q, "leader", 10*time.Second)
	if err != nil || epoch <= 0 {
		t.Fatalf("acquire: %d %v", epoch, err)
	}
	ends := rdb.PExpireTime(ctx, k.Lock()).Val()
	p.DelayRequests(requestWith(scriptHash(t, "lease"), k.Lock(), respBulk("renew")), lateAfterGivingUp, 2)
	if _, err := ps.RenewLease(ctx, q, "leader", epoch, 10*time.Second); err == nil {
		t.Fatal("a renewal whose both tries were held answered in time")
	}
	waitDelivered(t, p, 2)
	if got := rdb.PExpireTime(ctx, k.Lock()).Val(); got != ends {
		t.Fatalf("lease ends at %d ms after the late renewals, want %d as acquired", got.Milliseconds(), ends.Milliseconds())
	}
}
