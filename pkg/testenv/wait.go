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
