package queue

import (
	"math"
	"testing"
	"time"
)

func TestArrivalShares(t *testing.T) {
	known := func(waiting int64, times ...int64) LineHeads {
		return LineHeads{Known: true, Times: times, Waiting: waiting}
	}
	for _, tc := range []struct {
		name   string
		lines  []LineHeads
		window int
		want   []float64
	}{
		{"a new leader knows no heads: equal", []LineHeads{{}, known(5, 1, 2), known(1, 3)}, 4, []float64{1. / 3, 1. / 3, 1. / 3}},
		{"nobody waiting: equal", []LineHeads{known(0), known(0)}, 4, []float64{0.5, 0.5}},
		{"interleaved arrivals: even", []LineHeads{known(3, 1, 4, 7), known(3, 2, 5, 8), known(3, 3, 6, 9)}, 6,
			[]float64{1. / 3, 1. / 3, 1. / 3}},
		// The target came third; 600 junk ids behind them make their line
		// long, and change nothing.
		{"junk behind the target: not counted", []LineHeads{known(2, 1, 4), known(1, 2), known(601, 3, 100, 101, 102)}, 4,
			[]float64{0.5, 0.25, 0.25}},
		{"one line holds the earliest: all of it", []LineHeads{known(3, 1, 2, 3), known(3, 10, 11, 12)}, 3, []float64{1, 0}},
		{"a window beyond everyone: by counts", []LineHeads{known(1, 1), known(3, 2, 3, 4)}, 10, []float64{0.25, 0.75}},
		// Pre-queued people (no time) come first, taken from the lines in
		// proportion to the lines' lengths.
		{"the pre-queue: by length", []LineHeads{known(4, 0, 0, 0, 0), known(2, 0, 0)}, 3, []float64{2. / 3, 1. / 3}},
		{"the pre-queue before later arrivals", []LineHeads{known(2, 0, 5), known(2, 1, 2)}, 2, []float64{0.5, 0.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ArrivalShares(tc.lines, tc.window)
			var sum float64
			for i := range got {
				sum += got[i]
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("shares %v, want %v", got, tc.want)
				}
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("shares %v add up to %v", got, sum)
			}
		})
	}
}

func TestArrivalWindow(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		tick time.Duration
		want int
	}{
		{100, 100 * time.Millisecond, 11},
		{3000, 100 * time.Millisecond, 301},
		{0, 100 * time.Millisecond, 1},
		{1e6, 100 * time.Millisecond, MaxArrivalWindow},
	} {
		if got := ArrivalWindow(tc.rate, tc.tick); got != tc.want {
			t.Errorf("ArrivalWindow(%v, %v) = %d, want %d", tc.rate, tc.tick, got, tc.want)
		}
	}
}

func TestLineOrderBound(t *testing.T) {
	for _, tc := range []struct {
		shards int
		batch  int64
		rate   float64
		skew   time.Duration
		want   int64
	}{
		{1, 11, 100, 0, 11},
		{3, 301, 3000, 0, 2*301 + 6},
		{3, 301, 3000, 2 * time.Millisecond, 2*301 + 6 + 6},
		{64, 11, 100, time.Second, 22 + 128 + 100},
	} {
		if got := LineOrderBound(tc.shards, tc.batch, tc.rate, tc.skew); got != tc.want {
			t.Errorf("LineOrderBound(%d, %d, %v, %v) = %d, want %d", tc.shards, tc.batch, tc.rate, tc.skew, got, tc.want)
		}
	}
}
