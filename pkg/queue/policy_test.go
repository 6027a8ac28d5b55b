package queue

import (
	"testing"
	"time"
)

func TestETAFollowsRate(t *testing.T) {
	tests := []struct {
		name     string
		st       Standing
		wantSecs float64
	}{
		{"configured rate when nothing measured", Standing{State: Waiting, Position: 1750, ConfiguredRate: 175}, 10},
		{"measured rate wins", Standing{State: Waiting, Position: 1750, ConfiguredRate: 175, MeasuredRate: 87.5}, 20},
		{"front of the line", Standing{State: Waiting, Position: 1, ConfiguredRate: 100}, 0.01},
		{"not waiting", Standing{State: Admitted, ConfiguredRate: 100}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.st.ETA().Seconds(); got != tt.wantSecs {
				t.Fatalf("ETA = %vs, want %vs", got, tt.wantSecs)
			}
		})
	}
}

func TestRetryAfterGrowsWithPositionWithinCap(t *testing.T) {
	// A slow queue, so the half-ETA bound never kicks in.
	at := func(pos int64) time.Duration {
		return Standing{State: Waiting, Position: pos, ConfiguredRate: 1}.RetryAfter()
	}
	tests := []struct {
		pos  int64
		want time.Duration
	}{
		{1, time.Second},
		{100, time.Second},
		{200, 2 * time.Second},
		{400, 3 * time.Second},
		{1600, 5 * time.Second},
		{12800, 8 * time.Second},
		{1_000_000, MaxRetryAfter},
	}
	prev := time.Duration(0)
	for _, tt := range tests {
		got := at(tt.pos)
		if got != tt.want {
			t.Errorf("RetryAfter(pos %d) = %v, want %v", tt.pos, got, tt.want)
		}
		if got < prev {
			t.Errorf("RetryAfter(pos %d) = %v fell below %v", tt.pos, got, prev)
		}
		prev = got
	}
}

func TestRetryAfterNeverExceedsHalfTheWait(t *testing.T) {
	// 10,000/s: position 5,000 is half a second away; polling every 7 s would
	// make the user miss their turn.
	st := Standing{State: Waiting, Position: 5000, ConfiguredRate: 10_000}
	if got := st.RetryAfter(); got != MinRetryAfter {
		t.Fatalf("RetryAfter = %v, want %v", got, MinRetryAfter)
	}
	st.Position = 100_000 // 10 s away: half is 5 s, below the 6 s position step
	if got := st.RetryAfter(); got != 5*time.Second {
		t.Fatalf("RetryAfter = %v, want 5s", got)
	}
}

func TestJitterStaysWithinTenPercentAndCap(t *testing.T) {
	const n = 10_000
	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range n {
		d := Jitter(4 * time.Second)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 3600*time.Millisecond || hi > 4400*time.Millisecond {
		t.Fatalf("jitter of 4s ranged %v..%v, want within 3.6s..4.4s", lo, hi)
	}
	if hi-lo < 600*time.Millisecond {
		t.Fatalf("jitter of 4s ranged only %v..%v over %d draws: not spreading", lo, hi, n)
	}
	for range n {
		if d := Jitter(MaxRetryAfter); d > MaxRetryAfter {
			t.Fatalf("Jitter(cap) = %v, above the cap %v", d, MaxRetryAfter)
		}
	}
}

func TestCapacityIsTheSmallerLimit(t *testing.T) {
	c := DefaultConfig()
	if got := c.Capacity(); got != 100_000 { // 600 s x 175/s = 105,000 > 100,000
		t.Fatalf("Capacity = %d, want 100000", got)
	}
	c.MaxWaitSeconds = 60
	if got := c.Capacity(); got != 10_500 {
		t.Fatalf("Capacity = %d, want 10500", got)
	}
}
