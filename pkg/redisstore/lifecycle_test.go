package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// lcTick is the tick the lifecycle tests issue with. It is long so that one
// call's batch cap never limits the small numbers these tests admit.
const lcTick = time.Second

// lcAdmit runs issue ticks (bound: the outbox bound) until exactly n more
// people were admitted, offering at most the missing number of grants per
// tick, so nobody beyond n is let through. Credit accrues with Redis time, so
// the first tick or two may admit nobody; that is polled, not slept through.
func lcAdmit(t *testing.T, s *redisstore.Store, q string, epoch, bound int64, n int) {
	t.Helper()
	admitWith(t, s, q, epoch, bound, n, false)
}

// admitWith is lcAdmit, with ticks that send the history (as the
// dispatcher's do) when history is set.
func admitWith(t *testing.T, s *redisstore.Store, q string, epoch, bound int64, n int, history bool) {
	t.Helper()
	ctx := context.Background()
	got := 0
	testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("%d admissions in %s", n, q), func() bool {
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, OutboxBound: bound, Grants: grants(t, n-got), History: history})
		if err != nil || r.Held != "" || r.Paused || r.Gone {
			t.Fatalf("issue: %+v %v", r, err)
		}
		got += r.Issued
		return got >= n
	})
	if got != n {
		t.Fatalf("admitted %d, want %d", got, n)
	}
}

// lcSecret is the secret of user's token, as the user was told it.
func lcSecret(t *testing.T, s *redisstore.Store, q, user string) string {
	t.Helper()
	st, err := s.Position(context.Background(), q, user)
	if err != nil || st.State != queue.Admitted || st.Token == nil {
		t.Fatalf("%s's standing: %+v %v, want a token", user, st, err)
	}
	return st.Token.Secret
}

// lcScan lists q's keys matching pattern (after the queue's prefix) with
// their PTTL.
func lcScan(t *testing.T, rdb redis.UniversalClient, q, pattern string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	out := map[string]time.Duration{}
	iter := rdb.Scan(ctx, 0, redisstore.KeysFor(q).Prefix()+pattern, 10000).Iterator()
	for iter.Next(ctx) {
		out[iter.Val()] = rdb.PTTL(ctx, iter.Val()).Val()
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lcPerUserKeys checks that every per-user key of q expires by itself, and
// returns how many of each kind there are: tokens are the status markers
// that hold one (the token hash of an earlier version is never written).
func lcPerUserKeys(t *testing.T, rdb redis.UniversalClient, q string) (tokens, statuses, consumed int) {
	t.Helper()
	counts := map[string]int{}
	for _, kind := range []string{"token", "status", "consumed"} {
		for key, pttl := range lcScan(t, rdb, q, kind+":*") {
			// -2 (ns, as go-redis reports it): gone between SCAN and PTTL,
			// it expired, fine; -1: no expiry.
			if pttl <= 0 && pttl != -2 {
				t.Errorf("%s has PTTL %v: a per-user key without an expiry stays forever", key, pttl)
			}
			counts[kind]++
			if kind != "status" {
				continue
			}
			if _, _, ok := redisstore.ParseTokenMarker(rdb.Get(context.Background(), key).Val()); ok {
				tokens++
			}
		}
	}
	if counts["token"] != 0 {
		t.Errorf("%d token hashes: this version keeps tokens in the status markers", counts["token"])
	}
	return tokens, counts["status"], counts["consumed"]
}

// lcAckAll relays q's outbox the way the dispatcher does, without a broker:
// read every event for one consumer and acknowledge (delete) it.
func lcAckAll(t *testing.T, s *redisstore.Store, q string) int {
	t.Helper()
	return len(lcRelayed(t, s, q))
}

// lcRelayed reads and acknowledges every event of q's outbox, as the relay
// does, and returns them in order.
func lcRelayed(t *testing.T, s *redisstore.Store, q string) []queue.Event {
	t.Helper()
	ctx := context.Background()
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	var acked []queue.Event
	for {
		b, err := s.ReadOutboxes(ctx, "test-relay", 100, []queue.OutboxRead{{QueueID: q}})
		if err != nil || len(b) != 1 || b[0].Err != nil {
			t.Fatalf("read outbox: %v %+v", err, b)
		}
		if len(b[0].Events) == 0 {
			return acked
		}
		if err := s.AckOutboxes(ctx, b); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, b[0].Events...)
	}
}

func lcListed(t *testing.T, rdb redis.UniversalClient, q string) bool {
	t.Helper()
	ok, err := rdb.SIsMember(context.Background(), redisstore.QueuesKey, q).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// An update refused by its closure (an invalid PUT) must leave no trace: a
// registered id without configuration would be served by every dispatcher
// and listed by the admin API.
func TestLifecycleRefusedUpdateRegistersNothing(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q := testenv.ID(t)
	t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
	boom := errors.New("refused")
	calls, sawExists := 0, false
	_, created, err := s.UpdateConfig(ctx, q, func(c queue.Config, exists bool) (queue.Config, error) {
		calls++
		sawExists = sawExists || exists
		c.AdmissionRatePerSec = -1
		return c, boom
	})
	if !errors.Is(err, boom) || created {
		t.Fatalf("UpdateConfig: created=%v err=%v, want the closure's error", created, err)
	}
	if calls != 1 || sawExists {
		t.Fatalf("closure called %d times (exists=%v), want once for a new queue", calls, sawExists)
	}
	if lcListed(t, rdb, q) {
		t.Fatalf("%s is in %s after a refused create", q, redisstore.QueuesKey)
	}
	if keys := lcScan(t, rdb, q, "*"); len(keys) != 0 {
		t.Fatalf("keys left by a refused create: %v", keys)
	}
	if _, _, err := s.Config(ctx, q); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("Config after a refused create: %v, want ErrNotFound", err)
	}
}

// While the user's order is in flight the token is gone from the token key;
// enter must say "ordering", not hand out a new place (which would become a
// second token for the same person).
func TestLifecycleEnterWhileOrderingTakesNoPlace(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	fill(t, s, q, 3)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, 0, 1) // u0000 only; u0001 and u0002 keep waiting
	if _, err := s.Consume(ctx, q, "u0000", lcSecret(t, s, q, "u0000"), "order-1", 30*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	seqBefore := rdb.Get(ctx, k.Seq()).Val()
	for i := range 3 { // a refresh, twice more: same answer each time
		st, err := s.Enter(ctx, q, "u0000")
		if err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
		if st.State != queue.Admitted || !st.Ordering || st.Token != nil || st.Position != 0 || st.Total != 2 {
			t.Fatalf("enter %d while ordering: %+v, want ADMITTED, ordering, no token, no place, 2 waiting", i, st)
		}
	}
	if z := rdb.ZCard(ctx, k.Waiting()).Val(); z != 2 {
		t.Fatalf("ZCARD waiting = %d, want 2 (unchanged)", z)
	}
	if err := rdb.ZRank(ctx, k.Waiting(), "u0000").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("u0000 got a place in line while ordering: %v", err)
	}
	if seq := rdb.Get(ctx, k.Seq()).Val(); seq != seqBefore {
		t.Fatalf("seq moved %s -> %s: a place was handed out", seqBefore, seq)
	}
}

// Every per-user key must expire by itself whatever path its user took, and
// the inflight list must not keep entries nobody will ever settle: a queue
// that runs for months otherwise grows without bound.
func TestLifecyclePerUserKeysExpireAndInflightEmpties(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs, c.TokenTTLSeconds = 0, 60 })
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	// u0000 settles, u0001 is restored, u0002 fails for good, u0003 never
	// orders, u0004 stays in flight, u0005's restore comes too late.
	fill(t, s, q, 6)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, 0, 6)

	type step struct {
		name                       string
		do                         func()
		tokens, statuses, consumed int
		inflight                   int64
	}
	consumed := map[string]queue.Consumed{}
	consume := func(user, oid string, lease time.Duration) {
		c, err := s.Consume(ctx, q, user, lcSecret(t, s, q, user), oid, lease, time.Minute)
		if err != nil {
			t.Fatalf("consume %s: %v", user, err)
		}
		consumed[user] = c
	}
	steps := []step{
		{"issued", func() {}, 6, 6, 0, 0},
		{"all but u0003 consumed", func() {
			for _, u := range []string{"u0000", "u0001", "u0002", "u0004"} {
				consume(u, "o-"+u, 30*time.Second)
			}
			// A lease already over, so the reaper would look at it now.
			consume("u0005", "o-u0005", time.Millisecond)
		}, 1, 6, 5, 5},
		{"settled", func() {
			if ok, err := s.Settle(ctx, q, "u0000", consumed["u0000"].TokenID, "o-u0000"); !ok || err != nil {
				t.Fatalf("settle: %v %v", ok, err)
			}
		}, 1, 6, 4, 4},
		{"restored", func() {
			if o, err := s.Restore(ctx, q, "u0001", consumed["u0001"].TokenID, "o-u0001", true); o != queue.Restored || err != nil {
				t.Fatalf("restore: %s %v", o, err)
			}
		}, 2, 6, 3, 3},
		{"failed for good", func() {
			if o, err := s.Restore(ctx, q, "u0002", consumed["u0002"].TokenID, "o-u0002", false); o != queue.Freed || err != nil {
				t.Fatalf("restore (not restorable): %s %v", o, err)
			}
		}, 2, 6, 2, 2},
		{"u0005's data and marker expired", func() {
			for _, key := range []string{k.Consumed("u0005"), k.Status("u0005")} {
				rdb.PExpire(ctx, key, time.Millisecond)
			}
			testenv.WaitFor(t, 2*time.Second, "u0005's consumed data and marker to expire", func() bool {
				return rdb.Exists(ctx, k.Consumed("u0005"), k.Status("u0005")).Val() == 0
			})
		}, 2, 5, 1, 2},
		{"u0005's late restore", func() {
			// Nothing to match it against: the restore cannot act, and
			// the entry is still listed until someone hands it off.
			if o, err := s.Restore(ctx, q, "u0005", consumed["u0005"].TokenID, "o-u0005", true); o != queue.Duplicate || err != nil {
				t.Fatalf("late restore: %s %v, want DUPLICATE", o, err)
			}
		}, 2, 5, 1, 2},
	}
	for _, st := range steps {
		st.do()
		tk, ss, cs := lcPerUserKeys(t, rdb, q)
		in := rdb.ZCard(ctx, k.Inflight()).Val()
		if tk != st.tokens || ss != st.statuses || cs != st.consumed || in != st.inflight {
			t.Fatalf("after %s: %d token, %d status, %d consumed keys, %d inflight; want %d, %d, %d, %d",
				st.name, tk, ss, cs, in, st.tokens, st.statuses, st.consumed, st.inflight)
		}
	}
	// Settle and restore take their own entry off the inflight list.
	for _, u := range []string{"u0000", "u0001", "u0002"} {
		if err := rdb.ZScore(ctx, k.Inflight(), consumed[u].TokenID+":"+u).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("inflight still lists %s after its settle/restore: %v", u, err)
		}
	}

	// The stranded entry: overdue (its lease ended), with its user but no
	// order id, since the data naming the order is gone.
	over, err := s.Overdue(ctx, q, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(over) != 1 || over[0].UserID != "u0005" || over[0].TokenID != consumed["u0005"].TokenID || over[0].OrderID != "" {
		t.Fatalf("overdue = %+v, want only u0005's token with no order id", over)
	}
	if err := s.HandOff(ctx, q, over[0].UserID, over[0].TokenID); err != nil {
		t.Fatal(err)
	}
	if over, err := s.Overdue(ctx, q, 100); err != nil || len(over) != 0 {
		t.Fatalf("overdue after hand-off = %+v %v, want none", over, err)
	}
	// Only u0004's live order is left in flight.
	members := rdb.ZRange(ctx, k.Inflight(), 0, -1).Val()
	if want := consumed["u0004"].TokenID + ":u0004"; len(members) != 1 || members[0] != want {
		t.Fatalf("inflight = %v, want [%s]", members, want)
	}
}

// Every process that ever led a queue leaves its consumer name in the relay
// group; pruning removes the dead ones, never this replica's own and never
// one still holding unacknowledged events (they would be lost to XAUTOCLAIM).
func TestLifecyclePruneOutboxConsumers(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	key := redisstore.KeysFor(q).Outbox()
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	add := func() {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"type", "TokenIssued"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// read makes consumer take one new entry, acknowledging it if ack.
	read := func(consumer string, ack bool) {
		t.Helper()
		res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: redisstore.OutboxGroup, Consumer: consumer, Streams: []string{key, ">"}, Count: 1, Block: -1,
		}).Result()
		if err != nil || len(res) != 1 || len(res[0].Messages) != 1 {
			t.Fatalf("%s read: %v %v", consumer, res, err)
		}
		if ack {
			rdb.XAck(ctx, key, redisstore.OutboxGroup, res[0].Messages[0].ID)
		}
	}
	const idle = time.Second
	for range 3 {
		add()
	}
	read("self", true)
	read("dead", true)
	read("busy", false)
	consumers := func() map[string]redis.XInfoConsumer {
		cs, err := rdb.XInfoConsumers(ctx, key, redisstore.OutboxGroup).Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]redis.XInfoConsumer{}
		for _, c := range cs {
			out[c.Name] = c
		}
		return out
	}
	testenv.WaitFor(t, 5*time.Second, "the first three consumers to be idle for "+idle.String(), func() bool {
		cs := consumers()
		return cs["self"].Idle >= idle && cs["dead"].Idle >= idle && cs["busy"].Idle >= idle
	})
	add()
	read("fresh", true)

	n, err := s.PruneOutboxConsumers(ctx, q, "self", idle)
	if err != nil || n != 1 {
		t.Fatalf("pruned %d err %v, want 1 (dead)", n, err)
	}
	cs := consumers()
	names := make([]string, 0, len(cs))
	for name := range cs {
		names = append(names, name)
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"busy", "fresh", "self"}) || cs["busy"].Pending != 1 {
		t.Fatalf("consumers left %v (busy pending %d), want busy (1 pending), fresh, self", names, cs["busy"].Pending)
	}
	if n, err := s.PruneOutboxConsumers(ctx, q, "self", idle); err != nil || n != 0 {
		t.Fatalf("second prune: %d %v, want 0", n, err)
	}
}

func TestLifecycleUnregister(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	cases := []struct {
		name       string
		setup      func(t *testing.T) string
		removed    bool
		listedThen bool
	}{
		{"listed without config is removed", func(t *testing.T) string {
			q := testenv.ID(t)
			t.Cleanup(func() { _ = s.Purge(context.Background(), q) })
			rdb.SAdd(ctx, redisstore.QueuesKey, q)
			return q
		}, true, false},
		// A PUT re-created it: the removal is undone.
		{"listed with config stays", func(t *testing.T) string { return newQueue(t, s, nil) }, false, true},
		{"neither listed nor configured", func(t *testing.T) string { return testenv.ID(t) }, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := c.setup(t)
			removed, err := s.Unregister(ctx, q)
			if err != nil || removed != c.removed {
				t.Fatalf("Unregister = %v, %v; want %v", removed, err, c.removed)
			}
			if l := lcListed(t, rdb, q); l != c.listedThen {
				t.Fatalf("listed after Unregister = %v, want %v", l, c.listedThen)
			}
		})
	}
}

// A closed queue is deleted by the tick that finds its last slot, order and
// event gone; until then it is kept. What may remain is only what expires by
// itself: the status markers and the dispatch hash (its epoch fences old
// leaders of a re-created queue for an hour).
func TestLifecycleClosedQueueIsGoneAfterItsLastToken(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	fill(t, s, q, 3)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, 0, 2)
	if n, err := s.Close(ctx, q); err != nil || n != 1 {
		t.Fatalf("close: dropped %d err %v, want 1", n, err)
	}
	tick := func() queue.IssueResult {
		t.Helper()
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, Grants: grants(t, 5)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	c0, err := s.Consume(ctx, q, "u0000", lcSecret(t, s, q, "u0000"), "o0", 30*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := s.Consume(ctx, q, "u0001", lcSecret(t, s, q, "u0001"), "o1", 30*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Each thing still open keeps the queue: two orders in flight, then one,
	// then none but two unrelayed events.
	if r := tick(); r.Gone || !r.Paused || r.Issued != 0 {
		t.Fatalf("tick with orders in flight: %+v, want kept (paused, nothing issued)", r)
	}
	if ok, err := s.Settle(ctx, q, "u0000", c0.TokenID, "o0"); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if r := tick(); r.Gone {
		t.Fatalf("tick with one order in flight: %+v, want kept", r)
	}
	if o, err := s.Restore(ctx, q, "u0001", c1.TokenID, "o1", false); o != queue.Freed || err != nil {
		t.Fatalf("restore: %s %v", o, err)
	}
	if r := tick(); r.Gone {
		t.Fatalf("tick with 2 events unrelayed: %+v, want kept", r)
	}
	if n := lcAckAll(t, s, q); n != 2 {
		t.Fatalf("relayed %d events, want 2 TokenIssued", n)
	}
	if r := tick(); !r.Gone {
		t.Fatalf("tick with nothing left: %+v, want gone", r)
	}

	keys := lcScan(t, rdb, q, "*")
	for key, pttl := range keys {
		if pttl <= 0 && pttl != -2 {
			t.Errorf("%s left without an expiry (PTTL %v)", key, pttl)
		}
	}
	for _, gone := range []string{k.Config(), k.Waiting(), k.Active(), k.Inflight(), k.Outbox(), k.Seq(), k.Lock(), k.Consumed("u0000"), k.Consumed("u0001")} {
		if _, ok := keys[gone]; ok {
			t.Errorf("%s survived the queue's deletion", gone)
		}
	}
	// What expires by itself stays until then: both users' status markers
	// and spent-token records (they ordered).
	if len(keys) != 5 {
		t.Errorf("keys left: %v, want the dispatch hash, two status markers and two spent records", keys)
	}
	for _, u := range []string{"u0000", "u0001"} {
		for _, key := range []string{k.Status(u), k.Spent(u)} {
			if _, ok := keys[key]; !ok {
				t.Errorf("%s is not among the keys left %v", key, keys)
			}
		}
	}
	if d := keys[k.Dispatch()]; d <= 59*time.Minute || d > time.Hour {
		t.Errorf("dispatch hash PTTL %v, want about 1h", d)
	}
	if h := rdb.HGetAll(ctx, k.Dispatch()).Val(); len(h) != 1 || h["epoch"] != fmt.Sprint(epoch) {
		t.Errorf("dispatch hash %v, want only epoch %d", h, epoch)
	}
	// Registration is the caller's job (another slot).
	if !lcListed(t, rdb, q) {
		t.Fatal("the script unregistered the queue; that is the caller's job")
	}
	if removed, err := s.Unregister(ctx, q); !removed || err != nil {
		t.Fatalf("unregister: %v %v", removed, err)
	}
	// A late tick of the old leader and a new leader find nothing to do.
	if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, Grants: grants(t, 1)}); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("issue after deletion: %v, want ErrNotFound", err)
	}
	if _, err := s.AcquireLease(ctx, q, "b", time.Second); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("lease after deletion: %v, want ErrNotFound", err)
	}
	if n := len(lcScan(t, rdb, q, "*")); n != 5 {
		t.Fatalf("%d keys after the late tick and lease attempt, want still 5", n)
	}
}

// While the outbox holds OutboxBound unrelayed events, a tick admits nobody
// and writes nothing; admission resumes once the relay drains it.
func TestLifecycleOutboxBoundHoldsAdmission(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	const bound = 5
	fill(t, s, q, 20)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, bound, bound)
	if n, err := s.OutboxLen(ctx, q); n != bound || err != nil {
		t.Fatalf("outbox length = %d (%v), want %d", n, err, bound)
	}
	snapshot := func() string {
		ids := []string{}
		for _, m := range outbox(t, rdb, q) {
			ids = append(ids, m.ID)
		}
		return fmt.Sprintf("outbox %v waiting %d active %d issuedTotal %s", ids,
			rdb.ZCard(ctx, k.Waiting()).Val(), rdb.ZCard(ctx, k.Active()).Val(), rdb.HGet(ctx, k.Dispatch(), "issuedTotal").Val())
	}
	before := snapshot()
	for i := range 3 {
		if i > 0 {
			time.Sleep(50 * time.Millisecond) // credit to admit with, were it not held
		}
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, OutboxBound: bound, Grants: grants(t, 10)})
		if err != nil || r.Held != queue.HeldOutboxBacklog || r.Issued != 0 || r.Waiting != 15 {
			t.Fatalf("tick %d at the bound: %+v %v, want held (OUTBOX_BACKLOG), 0 issued, 15 waiting", i, r, err)
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("a held tick changed state:\n before %s\n after  %s", before, after)
	}
	if _, st, err := s.Config(ctx, q); err != nil || st.Held != "OUTBOX_BACKLOG" {
		t.Fatalf("stats while held: %+v %v, want Held OUTBOX_BACKLOG", st, err)
	}

	if n := lcAckAll(t, s, q); n != bound {
		t.Fatalf("relayed %d, want %d", n, bound)
	}
	admitted := 0
	testenv.WaitFor(t, 5*time.Second, "admission to resume", func() bool {
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, OutboxBound: bound, Grants: grants(t, 10)})
		if err != nil || r.Held != "" {
			t.Fatalf("tick after the relay drained the outbox: %+v %v", r, err)
		}
		admitted += r.Issued
		return admitted > 0
	})
	// The free room is the bound: never more events than it.
	if n, err := s.OutboxLen(ctx, q); admitted > bound || n != int64(admitted) || err != nil {
		t.Fatalf("admitted %d, outbox length %d (%v); want at most %d, equal", admitted, n, err, bound)
	}
	if _, st, err := s.Config(ctx, q); err != nil || st.Held != "" {
		t.Fatalf("stats after resuming: %+v %v, want Held empty", st, err)
	}
	if r := rdb.HGet(ctx, k.Dispatch(), "heldReason").Val(); strings.TrimSpace(r) != "" {
		t.Fatalf("heldReason %q after resuming, want empty", r)
	}
}
