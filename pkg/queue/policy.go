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

// ETA is the expected wait by Little's law, W = L / λ, with λ the admission
// rate and L the admissions before the user's own: of the people ahead, the
// share the queue measured leaving before their turn will not be there.
func (s Standing) ETA() time.Duration {
	mid, _, _, _ := s.expected()
	return seconds(mid)
}

// ETARange is an 80 % interval around ETA. Two things make the wait
// uncertain: how many of the people ahead will leave (binomially
// distributed around the measured share), and the admission rate over the
// wait, which the measured rate only estimates (rateUncertainty of it, one
// standard deviation). The two are independent; the interval is ETA ± 1.28
// of their combined standard deviation and half an admission, the low end
// never below 0.
func (s Standing) ETARange() (low, high time.Duration) {
	mid, ahead, p, rate := s.expected()
	if rate <= 0 {
		return 0, 0
	}
	sdLeavers := math.Sqrt(ahead*p*(1-p)) / rate
	sdRate := rateUncertainty * mid
	// Admissions come whole: half of one more on each side keeps a short
	// wait's interval from falling between two possible waits.
	d := z80*math.Sqrt(sdLeavers*sdLeavers+sdRate*sdRate) + 0.5/rate
	return seconds(max(mid-d, 0)), seconds(mid + d)
}

// rateUncertainty is the relative standard deviation assumed of the
// admission rate over a wait: the measured rate follows the dispatcher's
// ticks, and operators and the order path move it.
const rateUncertainty = 0.08

// z80 is the standard normal quantile of a two-sided 80 % interval.
const z80 = 1.2816

// expected is the expected wait in seconds and what it was made of: the
// people ahead, the leave share applied to them, the rate; all 0 when the
// user is not in line or nothing admits.
func (s Standing) expected() (mid, ahead, p, rate float64) {
	rate = s.Rate()
	if s.Position <= 0 || rate <= 0 {
		return 0, 0, 0, 0
	}
	p = min(max(s.LeaveShare, 0), 0.95)
	ahead = float64(s.Ahead())
	return (ahead*(1-p) + 1) / rate, ahead, p, rate
}

// seconds is secs as a Duration, saturating.
func seconds(secs float64) time.Duration {
	if secs > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(secs * float64(time.Second))
}

// RetryAfter is how long the client should wait before asking again, without
// jitter: 1 s in the first hundred, then 1 s more for each doubling of the
// position, capped at MaxRetryAfter, and never longer than half the ETA (a
// fast queue must not make a user miss their turn by polling too slowly),
// nor than MaxPoll (a queue with presence on).
func (s Standing) RetryAfter() time.Duration {
	d := s.retryAfter()
	if s.MaxPoll > 0 {
		d = min(d, s.MaxPoll)
	}
	return d
}

func (s Standing) retryAfter() time.Duration {
	switch s.State {
	case PreQueue:
		return s.preQueueRetry(0.5)
	case Bypass:
		return BypassRetryAfter
	}
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

// BypassRetryAfter is how often a BYPASS page asks whether the line is
// back: rarely enough not to hammer a gateway whose store is down, soon
// enough that the line resumes within seconds of Redis returning.
const BypassRetryAfter = 5 * time.Second

// pollHint is the polling hint a view carries, r uniform in [0, 1): a
// pre-queued person's is spread already (over a window longer than any
// jitter would keep), everyone else's is RetryAfter jittered.
func (s Standing) pollHint(r float64) time.Duration {
	d := Jitter(s.RetryAfter())
	if s.State == PreQueue {
		d = s.preQueueRetry(r)
	}
	if s.MaxPoll > 0 {
		d = min(d, s.MaxPoll)
	}
	return d
}

// Jitter spreads d by ±10 % so pollers who entered together drift apart, and
// keeps the result within MaxRetryAfter.
func Jitter(d time.Duration) time.Duration {
	f := 1 + retryJitter*(2*rand.Float64()-1)
	return min(time.Duration(float64(d)*f), MaxRetryAfter)
}

// Pre-queue polling. Before the start a pre-queued page needs nothing new
// (it counts down by itself), so it polls rarely; its poll after the start,
// where it learns its drawn place, is spread over a window that grows with
// the pre-queue (PreQueuePollRate polls per second), so the start is not a
// thundering herd at T-0.
const (
	// MaxPreQueuePoll is the longest pause between polls before the start.
	MaxPreQueuePoll = 30 * time.Second
	// PreQueuePollRate is the rate the first polls after the start are
	// spread to: 100,000 pre-queued poll over 50 s.
	PreQueuePollRate = 2000
	// MinDrawSpread and MaxDrawSpread bound that window.
	MinDrawSpread = time.Second
	MaxDrawSpread = time.Minute
	// drawSettle is how long after the start the first polls come: the
	// dispatcher draws within a tick or two.
	drawSettle = 500 * time.Millisecond
)

// DrawSpread is the window the first polls after the start are spread
// over, for preQueued people.
func DrawSpread(preQueued int64) time.Duration {
	d := time.Duration(float64(preQueued) / PreQueuePollRate * float64(time.Second))
	return min(max(d, MinDrawSpread), MaxDrawSpread)
}

// preQueueRetry is a pre-queued person's polling hint, r uniform in [0, 1):
// far from the start, MaxPreQueuePoll ±10 %; closer, a moment after the
// start, uniformly inside DrawSpread; after the start (the draw is running),
// within the next second or so, spread the same way but over at most 5 s.
func (s Standing) preQueueRetry(r float64) time.Duration {
	spread := DrawSpread(s.PreQueued)
	switch {
	case s.StartsIn <= 0:
		return drawSettle + time.Duration(r*float64(min(spread, 5*time.Second)))
	case s.StartsIn > MaxPreQueuePoll:
		return min(time.Duration(float64(MaxPreQueuePoll)*(0.9+0.2*r)), s.StartsIn)
	}
	return s.StartsIn + drawSettle + time.Duration(r*float64(spread))
}
