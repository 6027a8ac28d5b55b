package queue

import (
	"math"
	"math/rand/v2"
	"time"
)

// Polling policy. Someone near the front polls about once a second; someone
// thousands back polls every several seconds, so the polling load of a long
// line stays flat instead of growing with its length.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 10 * time.Second
	retryJitter   = 0.10
)

// Rate is the admission rate an estimate should use: the measured rate when a
// dispatcher has measured one, else the configured rate.
func (s Standing) Rate() float64 {
	if s.MeasuredRate > 0 {
		return s.MeasuredRate
	}
	return s.ConfiguredRate
}

// ETA is the expected wait by Little's law: W = L / λ, with L the user's
// position and λ the admission rate.
func (s Standing) ETA() time.Duration {
	rate := s.Rate()
	if s.Position <= 0 || rate <= 0 {
		return 0
	}
	secs := float64(s.Position) / rate
	if secs > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(secs * float64(time.Second))
}

// RetryAfter is how long the client should wait before asking again, without
// jitter: 1 s in the first hundred, then 1 s more for each doubling of the
// position, capped at MaxRetryAfter, and never longer than half the ETA (a
// fast queue must not make a user miss their turn by polling too slowly).
func (s Standing) RetryAfter() time.Duration {
	if s.State != Waiting {
		return MinRetryAfter
	}
	d := MinRetryAfter
	if s.Position > 100 {
		d += time.Duration(math.Log2(float64(s.Position)/100) * float64(time.Second))
	}
	if half := s.ETA() / 2; half < d {
		d = half
	}
	return min(max(d, MinRetryAfter), MaxRetryAfter)
}

// Jitter spreads d by ±10 % so pollers who entered together drift apart, and
// keeps the result within MaxRetryAfter.
func Jitter(d time.Duration) time.Duration {
	f := 1 + retryJitter*(2*rand.Float64()-1)
	return min(time.Duration(float64(d)*f), MaxRetryAfter)
}
