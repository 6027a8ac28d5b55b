package order

import (
	"errors"
	"testing"
	"time"
)

// TestLocalLimits: a queue's bucket holds a tenth of a second of its rate
// plus one: at 5/s a burst of 20 gets 2 through and 18 are told to retry in
// at most 200 ms (one order's worth); at 1,000/s 101 get through. Queues
// have buckets of their own, and a rate changed is applied to the next
// request. The clock is the test's: each burst arrives in one instant.
func TestLocalLimits(t *testing.T) {
	l := newLocalLimits()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	let := func(q string, perSec float64, n int) (allowed int, longest time.Duration) {
		for range n {
			var rl *RateLimitedError
			switch err := l.allow(q, perSec, now); {
			case err == nil:
				allowed++
			case errors.As(err, &rl):
				longest = max(longest, rl.RetryAfter)
			default:
				t.Fatalf("allow: %v", err)
			}
		}
		return allowed, longest
	}
	if n, wait := let("slow", 5, 20); n != 2 || wait < 100*time.Millisecond || wait > 200*time.Millisecond {
		t.Fatalf("at 5/s a burst of 20 let %d through, retry after %v; want 2, 100..200ms", n, wait)
	}
	if n, _ := let("fast", 1000, 200); n != 101 {
		t.Fatalf("at 1000/s a burst of 200 let %d through, want 101", n)
	}
	// Raised to 1,000/s (the request after the change applies it): the
	// bucket refills at that rate, no free burst at the change, and is 101
	// deep from then on; at 5/s 200 ms would have given 1.
	let("slow", 1000, 1)
	now = now.Add(200 * time.Millisecond)
	if n, _ := let("slow", 1000, 200); n != 101 {
		t.Fatalf("slow raised to 1000/s, 200ms later: a burst of 200 let %d through, want 101", n)
	}
	// Half the bucket's depth later, half of it is back.
	now = now.Add(50 * time.Millisecond)
	if n, _ := let("slow", 1000, 200); n != 50 {
		t.Fatalf("50ms after emptying at 1000/s a burst of 200 let %d through, want 50", n)
	}
}
