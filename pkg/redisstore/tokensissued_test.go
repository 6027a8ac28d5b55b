package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// outboxExtra is the people the outbox holds beyond its entries, as the
// dispatch hash counts them (0 when the field is absent).
func outboxExtra(t *testing.T, rdb redis.UniversalClient, q string) int64 {
	t.Helper()
	v, _ := rdb.HGet(context.Background(), redisstore.KeysFor(q).Dispatch(), "outboxExtra").Int64()
	return v
}

// A tick's admitted go to the outbox as one entry, which the relay reads
// back as one TokenIssued a person, in admission order, with what their
// tokens hold; acknowledging it (twice: a lost reply) empties the outbox
// and its count of people.
func TestATicksAdmittedAreOneOutboxEntry(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.ActivationSpreadMs = queue.MaxAdmissionRate, 1000
	})
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	fill(t, s, q, 5)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, 0, 5)
	entries := rdb.XLen(ctx, k.Outbox()).Val()
	if n, err := s.OutboxLen(ctx, q); n != 5 || err != nil || entries < 1 || entries > 5 {
		t.Fatalf("outbox: %d people (%v) in %d entries, want 5 people in 1 to 5 entries", n, err, entries)
	}
	if err := s.EnsureOutboxGroup(ctx, q); err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadOutboxes(ctx, "relay", 100, []queue.OutboxRead{{QueueID: q}})
	if err != nil || len(b) != 1 || b[0].Err != nil || len(b[0].Events) != 5 {
		t.Fatalf("read: %+v %v, want 5 events", b, err)
	}
	streams := map[string]bool{}
	for i, e := range b[0].Events {
		user := fmt.Sprintf("u%04d", i)
		tok, seq, ok := redisstore.ParseTokenMarker(rdb.Get(ctx, k.Status(user)).Val())
		if e.Type != queue.EventTokenIssued || e.UserID != user || e.Seq != int64(i+1) || e.QueueID != q || !ok || seq != e.Seq ||
			e.TokenID != tok.ID || e.ID != tok.ID+".issued" ||
			!e.ActivateAt.Equal(tok.ActivateAt) || !e.ExpiresAt.Equal(tok.ExpiresAt) || e.OccurredAt.IsZero() {
			t.Fatalf("event %d = %+v; want %s's TokenIssued, seq %d, its token %v", i, e, user, i+1, tok)
		}
		streams[e.StreamID] = true
	}
	if int64(len(streams)) != entries {
		t.Fatalf("events of %d stream entries, the outbox has %d", len(streams), entries)
	}
	for try := range 2 { // the second: a retry after a lost reply
		if err := s.AckOutboxes(ctx, b); err != nil {
			t.Fatal(err)
		}
		n, err := s.OutboxLen(ctx, q)
		if n != 0 || err != nil || rdb.XLen(ctx, k.Outbox()).Val() != 0 || outboxExtra(t, rdb, q) != 0 {
			t.Fatalf("ack %d: %d people (%v), %d entries, outboxExtra %d; want all 0", try, n, err,
				rdb.XLen(ctx, k.Outbox()).Val(), outboxExtra(t, rdb, q))
		}
	}
}

// The outbox bound counts people, not entries: at a bound of 7, a tick of
// 5 leaves room for 2, then admission holds until the relay drained it.
func TestTheOutboxBoundCountsPeople(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.AdmissionRatePerSec, c.ActivationSpreadMs = queue.MaxAdmissionRate, 0 })
	ctx := context.Background()
	const bound = 7
	fill(t, s, q, 20)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, bound, 5)
	r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, OutboxBound: bound, Grants: grants(t, 10)})
	if err != nil || r.Issued != 2 {
		t.Fatalf("tick with room for 2: %+v %v, want 2 issued", r, err)
	}
	r, err = s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick, OutboxBound: bound, Grants: grants(t, 10)})
	if err != nil || r.Held != queue.HeldOutboxBacklog || r.Issued != 0 {
		t.Fatalf("tick at the bound: %+v %v, want held (OUTBOX_BACKLOG)", r, err)
	}
	if n, err := s.OutboxLen(ctx, q); n != bound || err != nil {
		t.Fatalf("outbox: %d people (%v), want %d", n, err, bound)
	}
	if n := lcAckAll(t, s, q); n != bound {
		t.Fatalf("relayed %d, want %d", n, bound)
	}
	lcAdmit(t, s, q, epoch, bound, bound)
	if n, err := s.OutboxLen(ctx, q); n != bound || err != nil || outboxExtra(t, rdb, q) < 0 {
		t.Fatalf("after the drain: %d people (%v), outboxExtra %d; want %d, >= 0", n, err, outboxExtra(t, rdb, q), bound)
	}
}

// A tick may admit more people than Lua unpacks in one call (about
// 8,000): ten ticks' worth after a failover at 100,000 a second. 12,000
// in one tick are admitted, in order, and relayed.
func TestATickOfTwelveThousandAdmitsEveryoneInOrder(t *testing.T) {
	t.Parallel()
	const n = 12_000
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.MaxActive, c.ActivationSpreadMs = queue.MaxAdmissionRate, queue.MaxMaxActive, 0
	})
	ctx := context.Background()
	fill(t, s, q, n)
	epoch := lead(t, s, q, "a")
	// A first tick starts the clock; 150 ms later the credit is 15,000.
	if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: lcTick}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	lcAdmit(t, s, q, epoch, 0, n)
	if a := rdb.ZCard(ctx, redisstore.KeysFor(q).Active()).Val(); a != n {
		t.Fatalf("%d active, want %d", a, n)
	}
	evs := lcRelayed(t, s, q)
	if len(evs) != n {
		t.Fatalf("relayed %d, want %d", len(evs), n)
	}
	perTick := map[string]int{}
	most := 0
	for i, e := range evs {
		if e.UserID != fmt.Sprintf("u%04d", i) || e.Seq != int64(i+1) {
			t.Fatalf("event %d: %s seq %d, want u%04d seq %d", i, e.UserID, e.Seq, i, i+1)
		}
		perTick[e.StreamID]++
		most = max(most, perTick[e.StreamID])
	}
	if most <= 8000 {
		t.Fatalf("the largest tick admitted %d (ticks: %d), want one above Lua's unpack limit", most, len(perTick))
	}
}

// A token the person still holds when admitted again (written by issue or
// restore, which write the same five fields) is replaced whole, its
// expiry too.
func TestAdmissionReplacesATokenStillHeldWhole(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.AdmissionRatePerSec = queue.MaxAdmissionRate })
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	fill(t, s, q, 2)
	grantToken(t, rdb, q, "u0000", "old-secret", "old", time.Hour)
	epoch := lead(t, s, q, "a")
	lcAdmit(t, s, q, epoch, 0, 2)
	for _, u := range []string{"u0000", "u0001"} {
		tok, held, _ := heldToken(t, rdb, q, u)
		at := rdb.PExpireTime(ctx, k.Status(u)).Val()
		if !held || tok.ID == "old" || tok.ID == "" || tok.Secret == "old-secret" || at.Milliseconds() != tok.ExpiresAt.UnixMilli()+120000 {
			t.Fatalf("%s's token after admission: %+v (held %v), marker expiring at %d; want a new one, the marker 2 min past its expiry", u, tok, held, at.Milliseconds())
		}
	}
}
