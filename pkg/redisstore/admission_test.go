package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

func grants(t testing.TB, n int) []queue.Grant {
	t.Helper()
	out := make([]queue.Grant, n)
	for i := range out {
		g, err := queue.NewGrant()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = g
	}
	return out
}

func lead(t *testing.T, s *redisstore.Store, q, owner string) int64 {
	t.Helper()
	epoch, err := s.AcquireLease(context.Background(), q, owner, 5*time.Second)
	if err != nil || epoch == 0 {
		t.Fatalf("acquire lease: epoch %d err %v", epoch, err)
	}
	return epoch
}

func fill(t *testing.T, s *redisstore.Store, q string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Enter(context.Background(), q, fmt.Sprintf("u%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// outbox reads every event of q's outbox without consuming it, a
// TokensIssued entry as the TokenIssued of each of its people (read back
// by the store's own decoder, under the entry's id, in the fields a
// TokenIssued entry of one person had).
func outbox(t *testing.T, rdb redis.UniversalClient, q string) []redis.XMessage {
	t.Helper()
	msgs, err := rdb.XRange(context.Background(), redisstore.KeysFor(q).Outbox(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []redis.XMessage
	for _, m := range msgs {
		if m.Values["type"] != "TokensIssued" {
			out = append(out, m)
			continue
		}
		for _, e := range redisstore.DecodeOutbox(q, []redis.XMessage{m}) {
			v := map[string]any{"type": e.Type, "eid": e.ID, "q": e.QueueID, "user": e.UserID, "tid": e.TokenID,
				"seq": fmt.Sprint(e.Seq), "act": fmt.Sprint(e.ActivateAt.UnixMilli()), "exp": fmt.Sprint(e.ExpiresAt.UnixMilli()),
				"at": fmt.Sprint(e.OccurredAt.UnixMilli())}
			if e.TraceParent != "" {
				v["tp"] = e.TraceParent
			}
			if e.TraceState != "" {
				v["ts"] = e.TraceState
			}
			out = append(out, redis.XMessage{ID: e.StreamID, Values: v})
		}
	}
	return out
}

func TestLeaseIsExclusiveAndFenced(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	e1 := lead(t, s, q, "a")
	if e, err := s.AcquireLease(ctx, q, "b", time.Second); err != nil || e != 0 {
		t.Fatalf("second owner acquired: epoch %d err %v", e, err)
	}
	if ok, err := s.RenewLease(ctx, q, "b", e1, time.Second); ok || err != nil {
		t.Fatalf("stranger renewed: %v %v", ok, err)
	}
	if ok, err := s.RenewLease(ctx, q, "a", e1, time.Second); !ok || err != nil {
		t.Fatalf("owner could not renew: %v %v", ok, err)
	}
	if err := s.ReleaseLease(ctx, q, "a", e1); err != nil {
		t.Fatal(err)
	}
	e2 := lead(t, s, q, "b")
	if e2 <= e1 {
		t.Fatalf("epoch after takeover = %d, want above %d", e2, e1)
	}
	// The old leader's renewal fails now.
	if ok, _ := s.RenewLease(ctx, q, "a", e1, time.Second); ok {
		t.Fatal("old leader renewed a lease it no longer holds")
	}
}

func TestIssueWithOldEpochIsStaleAndChangesNothing(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	fill(t, s, q, 10)
	old := lead(t, s, q, "a")
	if err := s.ReleaseLease(ctx, q, "a", old); err != nil {
		t.Fatal(err)
	}
	lead(t, s, q, "b")
	k := redisstore.KeysFor(q)
	before, _ := rdb.HGetAll(ctx, k.Dispatch()).Result()

	time.Sleep(50 * time.Millisecond) // so that a write would show as credit
	_, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: old, Tick: 100 * time.Millisecond, Grants: grants(t, 20)})
	if !errors.Is(err, queue.ErrStaleEpoch) {
		t.Fatalf("issue with an old epoch: %v, want ErrStaleEpoch", err)
	}
	after, _ := rdb.HGetAll(ctx, k.Dispatch()).Result()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("dispatch state changed: %v -> %v", before, after)
	}
	if z := rdb.ZCard(ctx, k.Waiting()).Val(); z != 10 {
		t.Fatalf("waiting = %d, want 10", z)
	}
	if n := len(outbox(t, rdb, q)); n != 0 {
		t.Fatalf("outbox has %d events, want 0", n)
	}
}

func TestIssueAdmitsInOrderAtTheRateWithinTheBatchCap(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec = 100
		c.ActivationSpreadMs = 1000
		c.TokenTTLSeconds = 60
	})
	ctx := context.Background()
	fill(t, s, q, 200)
	epoch := lead(t, s, q, "a")
	tick := 100 * time.Millisecond

	// First tick starts the clock: no elapsed time, nothing issued.
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 20)})
	if err != nil || r.Issued != 0 {
		t.Fatalf("first tick: %+v %v", r, err)
	}
	// A slow tick (500 ms) makes up its own time: about 50 at 100/s.
	time.Sleep(500 * time.Millisecond)
	r, err = s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 200)})
	if err != nil || r.Issued < 50 || r.Issued > 53 {
		t.Fatalf("after 500ms: issued %d err %v, want 50..53 (rate x elapsed)", r.Issued, err)
	}
	capN := r.Issued
	msgs := outbox(t, rdb, q)
	if len(msgs) != capN {
		t.Fatalf("outbox has %d events, want %d", len(msgs), capN)
	}
	var firstAct, lastAct int64
	for i, m := range msgs {
		if m.Values["type"] != "TokenIssued" || m.Values["user"] != fmt.Sprintf("u%04d", i) || m.Values["seq"] != fmt.Sprint(i+1) {
			t.Fatalf("event %d = %v; want TokenIssued for u%04d seq %d", i, m.Values, i, i+1)
		}
		var act int64
		fmt.Sscan(m.Values["act"].(string), &act)
		if i == 0 {
			firstAct = act
		}
		lastAct = act
	}
	// Activation spread over the window: the last of n activates (n-1)/n s after the first.
	if d := lastAct - firstAct; d < 900 || d > 1000 {
		t.Fatalf("activation spread %d ms, want about %d", d, 1000*(capN-1)/capN)
	}
	// Tokens exist for exactly the admitted, with the status marker and a slot.
	k := redisstore.KeysFor(q)
	for i := range capN + 2 {
		u := fmt.Sprintf("u%04d", i)
		_, has, _ := heldToken(t, rdb, q, u)
		if has != (i < capN) {
			t.Errorf("%s: token present %v", u, has)
		}
	}
	if a := rdb.ZCard(ctx, k.Active()).Val(); a != int64(capN) {
		t.Fatalf("active slots = %d, want %d", a, capN)
	}
	if w := rdb.ZCard(ctx, k.Waiting()).Val(); w != int64(200-capN) {
		t.Fatalf("waiting = %d, want %d", w, 200-capN)
	}
	_, stats, _ := s.Config(ctx, q)
	if stats.IssuedTotal != int64(capN) || stats.MeasuredRate <= 0 {
		t.Fatalf("issuedTotal %d measured %v", stats.IssuedTotal, stats.MeasuredRate)
	}
	// A leader gone for 3 s catches up at most one second's worth (ten
	// ticks) plus one tick, not all 300 it missed.
	time.Sleep(3 * time.Second)
	r, err = s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 300)})
	if limit := queue.BatchCap(100, time.Second); err != nil || r.Issued != limit {
		t.Fatalf("after 3 s: issued %d err %v, want the one-second cap %d", r.Issued, err, limit)
	}
}

func TestIssueRespectsMaxActiveAndPrunesNoShows(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.MaxActive, c.TokenTTLSeconds, c.ActivationSpreadMs = 1000, 5, 10, 0
	})
	ctx := context.Background()
	fill(t, s, q, 20)
	epoch := lead(t, s, q, "a")
	tick := 100 * time.Millisecond
	s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: nil})
	time.Sleep(100 * time.Millisecond)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 200)})
	if err != nil || r.Issued != 5 {
		t.Fatalf("issued %d err %v, want 5 (maxActive)", r.Issued, err)
	}
	time.Sleep(100 * time.Millisecond)
	if r, _ = s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 200)}); r.Issued != 0 {
		t.Fatalf("issued %d with every slot taken, want 0", r.Issued)
	}
	// Make two slots expire now, as if their tokens ran out.
	k := redisstore.KeysFor(q)
	for _, u := range []string{"u0000", "u0001"} {
		rdb.ZAdd(ctx, k.Active(), redis.Z{Score: 1, Member: u})
	}
	r, err = s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 200)})
	if err != nil || r.Expired != 2 || r.Issued != 2 {
		t.Fatalf("after two expiries: %+v %v, want 2 expired, 2 issued", r, err)
	}
	if a := rdb.ZCard(ctx, k.Active()).Val(); a != 5 {
		t.Fatalf("active = %d, want 5", a)
	}
	expired := 0
	for _, m := range outbox(t, rdb, q) {
		if m.Values["type"] == "TokenExpired" {
			expired++
			if m.Values["reason"] != "NO_SHOW" {
				t.Fatalf("expired event %v", m.Values)
			}
		}
	}
	if expired != 2 {
		t.Fatalf("TokenExpired events = %d, want 2", expired)
	}
	if st, _ := s.Position(ctx, q, "u0000"); st.State != queue.Expired {
		t.Fatalf("no-show's position state %s, want EXPIRED", st.State)
	}
}

func TestPausedQueueIssuesNothingAndResumesWithoutBurst(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.State = queue.Paused; c.AdmissionRatePerSec = 50 })
	ctx := context.Background()
	fill(t, s, q, 100)
	epoch := lead(t, s, q, "a")
	tick := 100 * time.Millisecond
	for range 5 {
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 6)})
		if err != nil || !r.Paused || r.Issued != 0 {
			t.Fatalf("paused tick: %+v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { c.State = queue.Open; return c, nil })
	time.Sleep(100 * time.Millisecond)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: tick, Grants: grants(t, 6)})
	// 50/s x ~0.1 s since the last (paused) tick: about 5, not 25 from the paused half second.
	if err != nil || r.Issued < 4 || r.Issued > 6 {
		t.Fatalf("first open tick issued %d err %v, want about 5", r.Issued, err)
	}
}

func TestConsumeExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	ctx := context.Background()
	fill(t, s, q, 1)
	epoch := lead(t, s, q, "a")
	g := grants(t, 2)
	s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: nil})
	time.Sleep(20 * time.Millisecond)
	if r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: g}); err != nil || r.Issued != 1 {
		t.Fatalf("issue: %+v %v", r, err)
	}
	consumeRace(t, s, q, "u0000", g[0].Secret, 50)
	k := redisstore.KeysFor(q)
	if z := rdb.ZCard(ctx, k.Inflight()).Val(); z != 1 {
		t.Fatalf("inflight = %d, want 1", z)
	}
	// Wrong secret, wrong user, wrong queue: all invalid.
	for _, c := range []struct{ q, user, secret string }{{q, "u0000", "nope"}, {q, "someone", g[0].Secret}, {"other-" + q, "u0000", g[0].Secret}} {
		if _, err := s.Consume(ctx, c.q, c.user, c.secret, "o", time.Second, time.Second); !errors.Is(err, queue.ErrInvalidToken) {
			t.Errorf("consume %+v: %v, want ErrInvalidToken", c, err)
		}
	}
}

func TestConsumeBeforeActivateAtIsNotActive(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	k := redisstore.KeysFor(q)
	ctx := context.Background()
	now := time.Now()
	early := queue.Token{Secret: "sec", ID: "tid", ActivateAt: now.Add(3 * time.Second), ExpiresAt: now.Add(time.Minute)}
	rdb.Set(ctx, k.Status("early"), redisstore.TokenMarker(early, 1), 3*time.Minute)
	_, err := s.Consume(ctx, q, "early", "sec", "o1", time.Second, time.Second)
	var na *queue.NotActiveError
	if !errors.As(err, &na) || na.Wait < 2*time.Second || na.Wait > 3*time.Second {
		t.Fatalf("consume early: %v, want NotActiveError of about 3s", err)
	}
	if _, held, _ := heldToken(t, rdb, q, "early"); !held {
		t.Fatal("a not-yet-active token was consumed")
	}
}

// A token issued by an earlier version (a hash beside a marker naming its
// id) stays good through a rolling upgrade: shown, checked, consumed and
// restored (into the marker) by this version's scripts.
func TestATokenAnEarlierVersionIssuedIsStillServed(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	grantLegacyToken(t, rdb, q, "buyer", "sec", "tid-old", time.Minute)
	rdb.ZAdd(ctx, k.Active(), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "buyer"})
	for _, look := range []func(context.Context, string, string) (queue.Standing, error){s.Position, s.Enter} {
		st, err := look(ctx, q, "buyer")
		if err != nil || st.State != queue.Admitted || st.Token == nil || st.Token.Secret != "sec" || st.Token.ID != "tid-old" {
			t.Fatalf("standing of the holder: %+v %v, want ADMITTED with tid-old", st, err)
		}
	}
	if chk, err := s.CheckToken(ctx, q, "buyer", "sec"); err != nil || chk.State != queue.TokenValid {
		t.Fatalf("check: %+v %v, want VALID", chk, err)
	}
	if chk, err := s.CheckToken(ctx, q, "buyer", "junk"); err != nil || chk.State != queue.TokenInvalid {
		t.Fatalf("check of another secret: %+v %v, want INVALID", chk, err)
	}
	c, err := s.Consume(ctx, q, "buyer", "sec", "order-1", 30*time.Second, time.Minute)
	if err != nil || c.TokenID != "tid-old" {
		t.Fatalf("consume: %+v %v, want tid-old", c, err)
	}
	if n := rdb.Exists(ctx, k.Token("buyer")).Val(); n != 0 {
		t.Fatalf("the earlier version's token hash after its consume: %d keys, want 0", n)
	}
	if _, err := s.Consume(ctx, q, "buyer", "sec", "order-2", 30*time.Second, time.Minute); !errors.Is(err, queue.ErrInvalidToken) {
		t.Fatalf("second consume: %v, want ErrInvalidToken", err)
	}
	if o, err := s.Restore(ctx, q, "buyer", "tid-old", "order-1", true); err != nil || o != queue.Restored {
		t.Fatalf("restore: %s %v, want RESTORED", o, err)
	}
	tok, held, _ := heldToken(t, rdb, q, "buyer")
	if !held || tok.ID != "tid-old" || tok.Secret != "sec" || !tok.ExpiresAt.Equal(c.ExpiresAt) {
		t.Fatalf("restored: %+v held %v, want tid-old in the marker, expiring %v", tok, held, c.ExpiresAt)
	}
	if c2, err := s.Consume(ctx, q, "buyer", "sec", "order-3", 30*time.Second, time.Minute); err != nil || c2.TokenID != "tid-old" {
		t.Fatalf("consume of the restored token: %+v %v", c2, err)
	}
}

func TestRestoreIsIdempotentAndKeepsTheRemainingTTL(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	grantToken(t, rdb, q, "buyer", "sec", "tid-1", time.Minute)
	rdb.ZAdd(ctx, k.Active(), redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "buyer"})
	c, err := s.Consume(ctx, q, "buyer", "sec", "order-1", 30*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The same OrderFailed delivered five times: restored once.
	outcomes := map[queue.RestoreOutcome]int{}
	for range 5 {
		o, err := s.Restore(ctx, q, "buyer", c.TokenID, "order-1", true)
		if err != nil {
			t.Fatal(err)
		}
		outcomes[o]++
	}
	if outcomes[queue.Restored] != 1 || outcomes[queue.Duplicate] != 4 {
		t.Fatalf("outcomes %v, want 1 restored and 4 duplicates", outcomes)
	}
	st, err := s.Position(ctx, q, "buyer")
	if err != nil || st.State != queue.Admitted || st.Token == nil || st.Token.Secret != "sec" || !st.Token.ExpiresAt.Equal(c.ExpiresAt) {
		t.Fatalf("after restore: %+v %v", st, err)
	}
	// Back in its marker, with the expiry it had: the marker lives two
	// minutes past it.
	tok, held, pttl := heldToken(t, rdb, q, "buyer")
	if !held || !tok.ExpiresAt.Equal(c.ExpiresAt) || tok.Secret != "sec" || pttl < 175*time.Second || pttl > 3*time.Minute {
		t.Fatalf("restored token %+v held %v, marker TTL %v; want the same expiry and about 3 min", tok, held, pttl)
	}
	restored := 0
	for _, m := range outbox(t, rdb, q) {
		if m.Values["type"] == "TokenRestored" {
			restored++
		}
	}
	if restored != 1 || rdb.ZScore(ctx, k.Active(), "buyer").Val() == 0 {
		t.Fatalf("TokenRestored events %d (want 1); slot kept: %v", restored, rdb.ZScore(ctx, k.Active(), "buyer").Val())
	}
	// A late redelivery of the first failure after the token was used again
	// for a second order changes nothing.
	if _, err := s.Consume(ctx, q, "buyer", "sec", "order-2", 30*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Restore(ctx, q, "buyer", c.TokenID, "order-1", true); o != queue.Duplicate {
		t.Fatalf("stale restore: %s, want DUPLICATE", o)
	}
	// A non-restorable failure frees the slot.
	if o, _ := s.Restore(ctx, q, "buyer", c.TokenID, "order-2", false); o != queue.Freed {
		t.Fatalf("sold out: %s, want FREED", o)
	}
	if _, held, _ := heldToken(t, rdb, q, "buyer"); rdb.ZScore(ctx, k.Active(), "buyer").Err() != redis.Nil || held {
		t.Fatal("slot or token still there after a non-restorable failure")
	}
	if n := rdb.ZCard(ctx, k.Inflight()).Val(); n != 0 {
		t.Fatalf("inflight = %d, want 0", n)
	}
}

func TestSettleFreesTheSlotAndMarksOrdered(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	grantToken(t, rdb, q, "buyer", "sec", "tid", time.Minute)
	c, err := s.Consume(ctx, q, "buyer", "sec", "o1", 30*time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Position(ctx, q, "buyer"); st.State != queue.Admitted || !st.Ordering {
		t.Fatalf("in flight: %+v, want ADMITTED with an order in progress", st)
	}
	ok, err := s.Settle(ctx, q, "buyer", c.TokenID, "o1")
	if err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if again, _ := s.Settle(ctx, q, "buyer", c.TokenID, "o1"); again {
		t.Fatal("settled twice")
	}
	if st, _ := s.Position(ctx, q, "buyer"); st.State != queue.Ordered {
		t.Fatalf("after settle: %s, want ORDERED", st.State)
	}
	if rdb.ZCard(ctx, k.Active()).Val() != 0 || rdb.ZCard(ctx, k.Inflight()).Val() != 0 {
		t.Fatal("slot or inflight entry left after settle")
	}
	if o, _ := s.Restore(ctx, q, "buyer", c.TokenID, "o1", true); o != queue.Duplicate {
		t.Fatalf("restore after settle: %s, want DUPLICATE", o)
	}
}

// consumeRace runs n concurrent consumes of one token (order ids order-0
// and on), checks that exactly one took it and every other one got
// ErrInvalidToken, and returns the winner's order id.
func consumeRace(t *testing.T, s *redisstore.Store, q, user, secret string, n int) string {
	t.Helper()
	ctx := context.Background()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Consume(ctx, q, user, secret, fmt.Sprintf("order-%d", i), 30*time.Second, time.Minute)
		})
	}
	wg.Wait()
	ok, invalid, winner := 0, 0, ""
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			winner = fmt.Sprintf("order-%d", i)
		case errors.Is(err, queue.ErrInvalidToken):
			invalid++
		default:
			t.Errorf("consume %d: %v", i, err)
		}
	}
	if ok != 1 || invalid != n-1 {
		t.Fatalf("%d consumed, %d invalid; want 1 and %d", ok, invalid, n-1)
	}
	return winner
}
