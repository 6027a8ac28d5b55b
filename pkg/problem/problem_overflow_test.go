package problem_test

import (
	"math"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/problem"
)

// TestRetryAfterSecondsNearTheLargestDuration: d + time.Second - 1
// overflows for d within a second of the largest Duration, and the hint
// becomes "1" instead of about 292 years.
func TestRetryAfterSecondsNearTheLargestDuration(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{math.MaxInt64 - time.Second + 1, "9223372036"},
		{math.MaxInt64 - time.Second + 2, "9223372036"},
		{math.MaxInt64, "9223372037"},
	} {
		if got := problem.RetryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("RetryAfterSeconds(%d) = %q, want %q", int64(tc.d), got, tc.want)
		}
	}
}
