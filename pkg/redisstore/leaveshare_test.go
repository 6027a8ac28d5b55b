package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// TestPositionCarriesTheMeasuredLeaveShare: leaving the line counts in
// leftTotal (once per person, and only for someone who was waiting); enter
// and position answer leftTotal / (leftTotal + issuedTotal) once twenty
// people have left or been admitted, 0 before.
func TestPositionCarriesTheMeasuredLeaveShare(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
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
	for i := range 6 {
		if _, err := s.Leave(ctx, q, fmt.Sprintf("u%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Leaving twice, or leaving a line one is not in, counts nothing.
	for _, u := range []string{"u0000", "stranger"} {
		if _, err := s.Leave(ctx, q, u); err != nil {
			t.Fatal(err)
		}
	}
	if left := rdb.HGet(ctx, k.Dispatch(), redisstore.DispatchFieldLeftTotal).Val(); left != "6" {
		t.Fatalf("leftTotal %q after 6 people left, want 6", left)
	}
	if got := share(); got != 0 {
		t.Fatalf("leave share %v with 6 events, want 0 until 20", got)
	}
	rdb.HSet(ctx, k.Dispatch(), redisstore.DispatchFieldIssuedTotal, 14)
	if got := share(); math.Abs(got-0.3) > 1e-9 {
		t.Fatalf("leave share %v after 6 left and 14 admitted, want 0.3", got)
	}
	st, err := s.Enter(ctx, q, "late")
	if err != nil || math.Abs(st.LeaveShare-0.3) > 1e-9 {
		t.Fatalf("enter: %+v %v, want leave share 0.3", st, err)
	}
}
