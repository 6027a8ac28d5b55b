package dispatch

import (
	"sync"
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
	d.health.observe(h)
}

// healthReports are the rate controllers of the queues served, fed by the
// order-service's health reports (ObserveHealth, from the broker's
// consumer) and read by the ticks. The queues served are set by the
// discovery (keep), under the same lock a report is taken under, so a
// report of a queue no longer served is never kept.
type healthReports struct {
	mu     sync.Mutex
	served map[string]bool
	by     map[string]*queue.RateController
}

func newHealthReports() *healthReports {
	return &healthReports{served: map[string]bool{}, by: map[string]*queue.RateController{}}
}

// observe feeds h to its queue's controller, if the queue is served.
func (h *healthReports) observe(r queue.OrderHealth) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.served[r.QueueID] {
		h.controllerLocked(r.QueueID).Observe(r)
	}
}

// controller is q's rate controller (made on first use).
func (h *healthReports) controller(q string) *queue.RateController {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.controllerLocked(q)
}

func (h *healthReports) controllerLocked(q string) *queue.RateController {
	c := h.by[q]
	if c == nil {
		c = queue.NewRateController()
		h.by[q] = c
	}
	return c
}

// orderPath is q's order-path health from the latest reports, for its
// ticks to record (nil without a fresh report).
func (h *healthReports) orderPath(q string, now time.Time) *queue.OrderPath {
	h.mu.Lock()
	c := h.by[q]
	h.mu.Unlock()
	if c == nil {
		return nil
	}
	p, ok := c.Summary(now)
	if !ok {
		return nil
	}
	return &p
}

// keep sets the queues served to qs and forgets the controllers of the
// others.
func (h *healthReports) keep(qs []string) {
	served := make(map[string]bool, len(qs))
	for _, q := range qs {
		served[q] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.served = served
	for q := range h.by {
		if !served[q] {
			delete(h.by, q)
		}
	}
}

// propose is the rate ls's next tick should admit at, and why: for an
// ADAPTIVE queue the controller's step on the latest health reports; for
// a FIXED one (or before the first tick told the mode) none.
func (t *ticks) propose(ls *leadership, now time.Time) (float64, string) {
	if ls.tick.mode != queue.AdmissionAdaptive {
		return 0, ""
	}
	cfg := queue.Config{
		MinAdmissionRatePerSec: ls.tick.minRate, MaxAdmissionRatePerSec: ls.tick.maxRate,
		TargetOrderLatencyMs: ls.tick.target.Milliseconds(),
	}
	step := t.health.controller(ls.q).Step(cfg, ls.tick.rate, now)
	if step.Fresh {
		t.m.RateDecided(ls.q, string(step.Decision))
		if step.Decision == queue.RateDecrease || step.Decision == queue.RateHoldStale {
			ls.log.Info("admission rate", "decision", step.Decision, "from", ls.tick.rate, "to", step.Rate, "why", step.Reason)
		}
	}
	return step.Rate, string(step.Decision) + ": " + step.Reason
}
