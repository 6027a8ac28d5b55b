package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond every 20 ms until it holds, failing the test with what
// it waited for if d passes first. Tests wait for conditions, never for fixed
// times: this machine is shared and slow.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WithinAMinute waits, when less than d is left of the current minute of
// the clock (the local Redis's too), until the next minute begins, so a
// test that takes less than d runs within one minute: the history counts
// per minute of Redis time (docs/DESIGN.md, "History").
func WithinAMinute(t testing.TB, d time.Duration) {
	t.Helper()
	if d >= time.Minute {
		t.Fatalf("WithinAMinute(%v): a test that long cannot fit in a minute", d)
	}
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < d {
		time.Sleep(left + 50*time.Millisecond)
	}
}
