package main

import "math"

// pollInterval is how often, in seconds, the person at place p of a queue
// admitting rate people a second is told to poll again: Standing.RetryAfter
// of pkg/queue/policy.go without its jitter (1 s in the first hundred, 1 s
// more for each doubling of the place, never above half the wait, within
// 1 s and maxPoll), with nobody leaving the line. It also says whether every
// place behind p polls at maxPoll: both bounds only grow with the place.
func pollInterval(p, rate, maxPoll float64) (d float64, capped bool) {
	d = 1
	if p > 100 {
		d += math.Log2(p / 100)
	}
	half := p / rate / 2 // the ETA (p - 1 ahead, + 1) over the rate, halved
	capped = d >= maxPoll && half >= maxPoll
	d = min(d, half)
	return min(max(d, 1), maxPoll), capped
}

// pollRate is the polls a second of a queue of n people, all polling at
// their pollInterval: the sum over the places of 1 / interval.
func pollRate(n int64, rate, maxPoll float64) float64 {
	sum := 0.0
	for p := int64(1); p <= n; p++ {
		d, capped := pollInterval(float64(p), rate, maxPoll)
		if capped {
			return sum + float64(n-p+1)/maxPoll
		}
		sum += 1 / d
	}
	return sum
}
