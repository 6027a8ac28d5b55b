package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// TestOverdueUsesTheClockThatSetTheDeadline pins the reaper's work list to
// Redis TIME: a lease is over when Redis's clock says so, and the deadline
// reported is the one consume set from Redis TIME. Overdue takes no time
// from the caller at all, so a reaper whose clock runs ahead (the old API
// took its time.Now(): 25 s of skew declared a live 30 s lease abandoned)
// cannot misjudge a lease.
func TestOverdueUsesTheClockThatSetTheDeadline(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	fill(t, s, q, 2)
	epoch := lead(t, s, q, "leader")
	g := grants(t, 2)
	// The first tick only starts the credit; 50 ms later there is some.
	if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: g}); err != nil || r.Issued != 2 {
		t.Fatalf("issue: %+v %v, want 2", r, err)
	}
	before, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(ctx, q, "u0000", g[0].Secret, "order-long", 30*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(ctx, q, "u0001", g[1].Secret, "order-short", 300*time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	after, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if over, err := s.Overdue(ctx, q, 10); err != nil || len(over) != 0 {
		t.Fatalf("overdue at once: %+v %v, want none", over, err)
	}
	// Wait until Redis's clock (not ours) is past the short lease.
	deadline := after.Add(300 * time.Millisecond)
	for {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.After(deadline.Add(20 * time.Millisecond)) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	over, err := s.Overdue(ctx, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(over) != 1 || over[0].UserID != "u0001" || over[0].OrderID != "order-short" || over[0].TokenID != g[1].TokenID {
		t.Fatalf("overdue: %+v, want exactly u0001's short lease", over)
	}
	lo, hi := before.Add(300*time.Millisecond).Truncate(time.Millisecond), after.Add(300*time.Millisecond)
	if d := over[0].Deadline; d.Before(lo) || d.After(hi) {
		t.Fatalf("deadline %v outside Redis TIME + lease [%v, %v]", d, lo, hi)
	}
}
