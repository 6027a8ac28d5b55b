package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// TestLeaveShareCountsResolvedCohorts: leaving counts in leftTotal (once per
// person, only for someone who was waiting); the leave share enter and
// position answer is that of the resolved cohort, everyone who entered
// before the last person admitted: leavers behind the head wait in left
// until an admission passes them. 0 until twenty are resolved.
func TestLeaveShareCountsResolvedCohorts(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.ActivationSpreadMs = 0 })
	ctx := context.Background()
	k := redisstore.KeysFor(q)
	fill(t, s, q, 30)
	share := func() float64 {
		t.Helper()
		st, err := s.Position(ctx, q, "u0029")
		if err != nil {
			t.Fatal(err)
		}
		return st.LeaveShare
	}
	leave := func(users ...string) {
		t.Helper()
		for _, u := range users {
			if _, err := s.Leave(ctx, q, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Six of the first twenty leave, one behind them; leaving twice, or a
	// line one is not in, counts nothing.
	leave("u0000", "u0001", "u0002", "u0003", "u0004", "u0005", "u0025", "u0000", "stranger")
	if left := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldLeftTotal).Val(); left != "7" {
		t.Fatalf("leftTotal %q after 7 people left, want 7", left)
	}
	if got, n := share(), rdb.ZCard(ctx, k.Left()).Val(); got != 0 || n != 7 {
		t.Fatalf("before any admission: share %v with %d unresolved leavers, want 0 and 7", got, n)
	}
	// Fourteen admitted (u0006..u0019): the six before them are resolved,
	// u0025 is not.
	epoch := lead(t, s, q, "a")
	s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second})
	time.Sleep(150 * time.Millisecond)
	if r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: time.Second, Grants: grants(t, 14)}); err != nil || r.Issued != 14 {
		t.Fatalf("issue: %+v %v, want 14", r, err)
	}
	resolved := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldLeftResolved).Val()
	if got, n := share(), rdb.ZCard(ctx, k.Left()).Val(); math.Abs(got-0.3) > 1e-9 || n != 1 || resolved != "6" {
		t.Fatalf("after 14 admitted: share %v, %d unresolved, leftResolved %q; want 0.3 (6 / 20), 1 and 6", got, n, resolved)
	}
	st, err := s.Enter(ctx, q, "late")
	if err != nil || math.Abs(st.LeaveShare-0.3) > 1e-9 {
		t.Fatalf("enter: %+v %v, want leave share 0.3", st, err)
	}
	for i := 20; i < 30; i++ {
		if st, _ := s.Position(ctx, q, fmt.Sprintf("u%04d", i)); i != 25 && st.State != queue.Waiting {
			t.Fatalf("u%04d is %s, want WAITING", i, st.State)
		}
	}
}
