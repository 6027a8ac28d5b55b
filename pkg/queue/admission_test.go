package queue_test

import (
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// A tick's grants cover the span the issue script may make up: the time
// since the last applied tick (a quarter more), at least one tick, at most
// ten ticks and never less than a second.
func TestGrantsForCoverTheCatchUpSpan(t *testing.T) {
	t.Parallel()
	const rate = 50_000.0
	ms := time.Millisecond
	for _, tc := range []struct {
		tick, since time.Duration
		want        int
	}{
		{100 * ms, 0, 50_001},        // a new leader: a second
		{100 * ms, 40 * ms, 5_001},   // at least one tick
		{100 * ms, 400 * ms, 25_001}, // 500 ms
		{100 * ms, 3 * time.Second, 50_001},
		{50 * ms, 0, 50_001},        // a second, not ten ticks' 500 ms
		{50 * ms, 600 * ms, 37_501}, // a slow tick: 750 ms
		{50 * ms, 800 * ms, 50_001}, // 1,000 ms
		{50 * ms, 3 * time.Second, 50_001},
		{10 * ms, 0, 50_001},
		{time.Second, 0, 500_001}, // ten ticks where they are longer
		{time.Second, 3 * time.Second, 187_501},
	} {
		if got := queue.GrantsFor(rate, tc.tick, tc.since); got != tc.want {
			t.Errorf("GrantsFor(%v, tick %v, since %v) = %d, want %d", rate, tc.tick, tc.since, got, tc.want)
		}
	}
	for tick, want := range map[time.Duration]time.Duration{10 * ms: time.Second, 50 * ms: time.Second,
		100 * ms: time.Second, 250 * ms: 2500 * ms, time.Second: 10 * time.Second} {
		if got := queue.CatchUpSpan(tick); got != want {
			t.Errorf("CatchUpSpan(%v) = %v, want %v", tick, got, want)
		}
	}
}
