package queue

import (
	"fmt"
	"sync"
	"time"
)

// Adaptive admission: an AIMD controller, as TCP's congestion control.
// Once per health report (a second) it looks at the order path: if the
// transactions' p95 is over the queue's target, or more than
// MaxUnavailableShare of the attempts were answered 503 or timed out, or
// the order events pile up (OutboxBacklogLimit), it cuts the rate by
// DecreaseFactor; otherwise it adds a twentieth of the range. A
// multiplicative cut gets away from an overload in a few seconds (0.7^2 is
// under half), the small additive step probes back without overshooting
// far, and the pair converges instead of oscillating (AIMD's fairness and
// stability argument, Chiu and Jain 1989). Admissions reach the order path
// seconds later (people take time to order), so after a cut the controller
// waits DecreaseCooldown before cutting again: without it, the reports of
// the seconds before the cut would drive the rate to the floor. With no
// report for HealthStaleAfter it holds the rate: it never races up blind;
// nor on a report of an interval in which no order finished (an idle order
// path, or one so stuck that nothing got through: its time-outs come as
// 503s, and cut the rate, when they end).
const (
	DecreaseFactor      = 0.7
	IncreaseSteps       = 20
	DecreaseCooldown    = 2 * time.Second
	HealthStaleAfter    = 5 * time.Second
	MaxUnavailableShare = 0.02
	OutboxBacklogLimit  = 10_000
)

// RateDecision is why the controller set the rate it set.
type RateDecision string

// The decisions, as the admin view and the metrics name them.
const (
	RateIncrease   RateDecision = "INCREASE"
	RateAtMax      RateDecision = "AT_MAX"
	RateDecrease   RateDecision = "DECREASE"
	RateAtMin      RateDecision = "AT_MIN"
	RateCooldown   RateDecision = "COOLDOWN"
	RateHoldStale  RateDecision = "HOLD_STALE"
	RateHoldNoNews RateDecision = "HOLD"
)

// RateStep is one decision: the rate, what decided it and why, in words.
// Fresh is set when the step judged a new report (or found the reports
// stale), not repeated the last decision.
type RateStep struct {
	Rate     float64
	Decision RateDecision
	Reason   string
	Fresh    bool
}

// RateController steers one ADAPTIVE queue. Reports come from the broker
// consumer while the tick loop steps it, so it is safe for concurrent use.
type RateController struct {
	mu       sync.Mutex
	reports  map[string]OrderHealth // the newest per source
	actedOn  time.Time              // newest report At already acted on
	cutAt    time.Time              // last decrease
	last     RateStep
	interval time.Duration
}

// NewRateController returns a controller with no reports.
func NewRateController() *RateController {
	return &RateController{reports: map[string]OrderHealth{}}
}

// Observe takes one report; an older one than the source's newest is
// ignored (redelivery, reordering).
func (c *RateController) Observe(h OrderHealth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.reports[h.Source]; ok && !h.At.After(old.At) {
		return
	}
	c.reports[h.Source] = h
}

// Step decides the rate for cfg's queue, currently admitting at current,
// at now. Without a new report since the last step it keeps the last
// decision.
func (c *RateController) Step(cfg Config, current float64, now time.Time) RateStep {
	c.mu.Lock()
	defer c.mu.Unlock()
	lo, hi := cfg.MinAdmissionRatePerSec, cfg.MaxAdmissionRatePerSec
	current = min(max(current, lo), hi)
	var newest time.Time
	for src, h := range c.reports {
		if now.Sub(h.At) > HealthStaleAfter {
			delete(c.reports, src)
			continue
		}
		if h.At.After(newest) {
			newest = h.At
		}
	}
	if newest.IsZero() {
		fresh := c.last.Decision != RateHoldStale
		c.last = RateStep{current, RateHoldStale, fmt.Sprintf("no order-service health report for %v: holding", HealthStaleAfter), fresh}
		return c.last
	}
	if !newest.After(c.actedOn) {
		c.last.Rate, c.last.Fresh = current, false
		if c.last.Decision == "" {
			c.last.Decision, c.last.Reason = RateHoldNoNews, "waiting for the next health report"
		}
		return c.last
	}
	c.actedOn = newest
	// The reports of the interval that just ended, one per source.
	var orders, unavailable, backlog int64
	var p95 time.Duration
	for _, h := range c.reports {
		window := max(h.Interval, time.Second) * 3 / 2
		if newest.Sub(h.At) >= window {
			continue
		}
		orders += h.Orders
		unavailable += h.Unavailable
		p95 = max(p95, h.P95)
		backlog = max(backlog, h.OutboxBacklog)
	}
	target := time.Duration(cfg.TargetOrderLatencyMs) * time.Millisecond
	var why string
	switch {
	case p95 > target:
		why = fmt.Sprintf("order p95 %v over the %v target", p95.Round(time.Millisecond), target)
	case unavailable > 0 && float64(unavailable) > MaxUnavailableShare*float64(max(orders, 1)):
		why = fmt.Sprintf("%d of %d orders answered 503 or timed out", unavailable, max(orders, unavailable))
	case backlog > OutboxBacklogLimit:
		why = fmt.Sprintf("%d order events wait to be published", backlog)
	}
	c.last = c.judge(why, current, lo, hi, p95, target, orders, now)
	c.last.Fresh = true
	return c.last
}

// judge turns one interval's verdict (why it was overloaded, or "") into
// the next rate.
func (c *RateController) judge(why string, current, lo, hi float64, p95, target time.Duration, orders int64, now time.Time) RateStep {
	if why != "" {
		switch {
		case now.Sub(c.cutAt) < DecreaseCooldown:
			return RateStep{Rate: current, Decision: RateCooldown, Reason: why + "; waiting for the last cut to show"}
		case current <= lo:
			return RateStep{Rate: lo, Decision: RateAtMin, Reason: why + "; at the minimum"}
		}
		c.cutAt = now
		return RateStep{Rate: max(lo, current*DecreaseFactor), Decision: RateDecrease, Reason: why}
	}
	if orders == 0 {
		// No order finished: an idle order path, or one so stuck nothing
		// got through. Either way there is nothing to judge by.
		return RateStep{Rate: current, Decision: RateHoldNoNews, Reason: "no order finished in the last interval: holding"}
	}
	if current >= hi {
		return RateStep{Rate: hi, Decision: RateAtMax, Reason: fmt.Sprintf("healthy (p95 %v, target %v): at the maximum", p95.Round(time.Millisecond), target)}
	}
	return RateStep{Rate: min(hi, current+(hi-lo)/IncreaseSteps), Decision: RateIncrease,
		Reason: fmt.Sprintf("healthy (p95 %v, target %v, %d orders)", p95.Round(time.Millisecond), target, orders)}
}

// OrderPath is how a queue's orders went in the last health interval, as
// its order-service replicas reported it (order.health), added up: the
// order attempts, those created, those answered 503 or timed out, the
// worst p95 and the largest outbox backlog of any replica. The leader
// records it with its ticks, for the admin view and the console.
type OrderPath struct {
	P95                                           time.Duration
	Attempts, Created, Unavailable, OutboxBacklog int64
	// At is when it was recorded (zero: no report).
	At time.Time
}

// Summary is the order path's health from the reports of the interval
// that ended last (those within 1.5 intervals of the newest); false
// without a report newer than HealthStaleAfter.
func (c *RateController) Summary(now time.Time) (OrderPath, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var newest time.Time
	for _, h := range c.reports {
		if now.Sub(h.At) <= HealthStaleAfter && h.At.After(newest) {
			newest = h.At
		}
	}
	if newest.IsZero() {
		return OrderPath{}, false
	}
	var p OrderPath
	for _, h := range c.reports {
		if window := max(h.Interval, time.Second) * 3 / 2; newest.Sub(h.At) >= window || now.Sub(h.At) > HealthStaleAfter {
			continue
		}
		p.Attempts += h.Orders
		p.Created += h.Created
		p.Unavailable += h.Unavailable
		p.P95 = max(p.P95, h.P95)
		p.OutboxBacklog = max(p.OutboxBacklog, h.OutboxBacklog)
	}
	return p, true
}
