package queue

import (
	"math"
	"math/rand/v2"
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

// TestETADiscountsLeavers: of the people ahead, the measured share of
// leavers is not waited for; the user's own admission always is.
func TestETADiscountsLeavers(t *testing.T) {
	tests := []struct {
		name     string
		share    float64
		pos      int64
		wantSecs float64
	}{
		{"nobody leaves", 0, 1001, 100.1},
		{"three in ten leave", 0.3, 1001, 70.1},
		{"front of the line waits for itself", 0.3, 1, 0.1},
		{"a share above 95 % counts as 95 %", 1, 1001, 5.1},
		{"a negative share counts as none", -0.5, 1001, 100.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Standing{State: Waiting, Position: tt.pos, ConfiguredRate: 10, LeaveShare: tt.share}
			if got := st.ETA().Seconds(); math.Abs(got-tt.wantSecs) > 1e-6 {
				t.Fatalf("ETA = %vs, want %vs", got, tt.wantSecs)
			}
		})
	}
}

// TestETARangeCoversEightyPercent: under the model's own assumptions
// (each person ahead leaves with the measured share, independently; the
// rate over the wait is off by rateUncertainty, one standard deviation)
// the interval holds the simulated wait 80 % of the time, give or take
// sampling, at every position; and it is the formula's, worked by hand
// for one case.
func TestETARangeCoversEightyPercent(t *testing.T) {
	st := Standing{State: Waiting, Position: 401, ConfiguredRate: 10, LeaveShare: 0.25}
	low, high := st.ETARange()
	if math.Abs(low.Seconds()-26.77) > 0.01 || math.Abs(high.Seconds()-33.43) > 0.01 {
		t.Fatalf("range %v..%v, want 26.77s..33.43s", low, high)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, pos := range []int64{2, 20, 200, 2000} {
		st := Standing{State: Waiting, Position: pos, ConfiguredRate: 20, LeaveShare: 0.3}
		low, high := st.ETARange()
		const runs = 4000
		inside := 0
		for range runs {
			stay := 0
			for range pos - 1 {
				if rng.Float64() >= 0.3 {
					stay++
				}
			}
			rate := 20 * (1 + rateUncertainty*rng.NormFloat64())
			wait := time.Duration(float64(stay+1) / rate * float64(time.Second))
			if wait >= low && wait <= high {
				inside++
			}
		}
		share := float64(inside) / runs
		t.Logf("position %d: %v..%v held %.3f of %d simulated waits", pos, low, high, share, runs)
		// Few people ahead: the interval spans whole admissions and holds
		// more; many: it is the 80 % the page promises.
		if share < 0.76 || (pos >= 200 && share > 0.86) {
			t.Errorf("position %d: the range %v..%v held %.3f of the simulated waits, want about 0.80", pos, low, high, share)
		}
	}
}
