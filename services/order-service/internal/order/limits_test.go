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
// request.
func TestLocalLimits(t *testing.T) {
	l := newLocalLimits()
	let := func(q string, perSec float64, n int) (allowed int, longest time.Duration) {
		for range n {
			var rl *RateLimitedError
			switch err := l.allow(q, perSec); {
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
	// The bucket refills while the loop runs: at 1000/s one more for each
	// millisecond it took (a loaded machine under -race takes several).
	refilled := func(took time.Duration) int { return int(took/time.Millisecond) + 1 }
	start := time.Now()
	if n, _ := let("fast", 1000, 200); n < 101 || n > 101+refilled(time.Since(start)) {
		t.Fatalf("at 1000/s a burst of 200 let %d through in %v, want 101 and at most one more a millisecond", n, time.Since(start))
	}
	// Raised to 1,000/s (the request after the change applies it): the
	// bucket refills at that rate, no free burst at the change, and is 101
	// deep from then on; at 5/s 200 ms would have given 1.
	let("slow", 1000, 1)
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	if n, _ := let("slow", 1000, 200); n < 101 || n > 101+refilled(time.Since(start)) {
		t.Fatalf("slow raised to 1000/s, 200ms later: a burst of 200 let %d through in %v, want 101 and at most one more a millisecond", n, time.Since(start))
	}
}
