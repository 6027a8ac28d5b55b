package dispatch

import (
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// ObserveHealth takes one order-service health report (order.health). Every
// replica keeps the reports of every queue it serves, led or not, so a new
// leader steers from the same picture; reports of other queues are dropped.
// A report is dated by this replica's clock when it arrives, so clock skew
// between hosts can neither make reports look stale nor keep old ones
// fresh.
func (d *Dispatcher) ObserveHealth(h queue.OrderHealth) {
	h.At = time.Now()
	l := d.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.served[h.QueueID] {
		return
	}
	c := l.health[h.QueueID]
	if c == nil {
		c = queue.NewRateController()
		l.health[h.QueueID] = c
	}
	c.Observe(h)
}

// controller is q's rate controller (made on first use).
func (l *leader) controller(q string) *queue.RateController {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.health[q]
	if c == nil {
		c = queue.NewRateController()
		l.health[q] = c
	}
	return c
}

// propose is the rate ls's next tick should admit at, and why: for an
// ADAPTIVE queue the controller's step on the latest health reports; for
// a FIXED one (or before the first tick told the mode) none.
func (l *leader) propose(ls *leadership, now time.Time) (float64, string) {
	if ls.mode != queue.AdmissionAdaptive {
		return 0, ""
	}
	cfg := queue.Config{
		MinAdmissionRatePerSec: ls.minRate, MaxAdmissionRatePerSec: ls.maxRate,
		TargetOrderLatencyMs: ls.target.Milliseconds(),
	}
	step := l.controller(ls.q).Step(cfg, ls.rate, now)
	if step.Fresh {
		l.d.m.RateDecided(ls.q, string(step.Decision))
		if step.Decision == queue.RateDecrease || step.Decision == queue.RateHoldStale {
			ls.log.Info("admission rate", "decision", step.Decision, "from", ls.rate, "to", step.Rate, "why", step.Reason)
		}
	}
	return step.Rate, string(step.Decision) + ": " + step.Reason
}
