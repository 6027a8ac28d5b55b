//go:build !race

// The race detector makes sync.Pool drop entries at random, so allocation
// counts only hold without it: `make test` runs the *DoesNotAllocate tests
// a second time without -race.

package ticket

import "testing"

// A poll checks a ticket on every request; the check must not allocate
// (it runs at tens of thousands a second per replica).
func TestCheckDoesNotAllocate(t *testing.T) {
	s := signer(t, keyB, keyA) // a ticket of the second key: both MACs computed
	tk := signer(t, keyA).Sign("sale", "alice", Place{Generation: 7, Seq: 42})
	var err error
	allocs := testing.AllocsPerRun(1000, func() { _, err = s.Check("sale", "alice", tk) })
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("Check allocates %.1f times, want 0", allocs)
	}
}

// A poll answered from the frontier hands its ticket back through
// CheckCurrent: a ticket of the first key, every ticket outside a
// rotation, must cost no allocation either.
func TestCheckCurrentOfTheFirstKeyDoesNotAllocate(t *testing.T) {
	s := signer(t, keyA, keyB)
	tk := s.Sign("sale", "alice", Place{Generation: 7, Seq: 42})
	var got string
	var err error
	allocs := testing.AllocsPerRun(1000, func() { _, got, err = s.CheckCurrent("sale", "alice", tk) })
	if err != nil || got != tk {
		t.Fatalf("CheckCurrent: %q %v", got, err)
	}
	if allocs != 0 {
		t.Fatalf("CheckCurrent allocates %.1f times, want 0", allocs)
	}
}
