package dispatch

import (
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Metrics is what the Dispatcher records as it works; wire implements it
// with Prometheus series. Its methods are called from several goroutines
// at once and must not block.
type Metrics interface {
	// Leading: this replica leads q from now on.
	Leading(q string)
	// SteppedDown: this replica leads q no longer, so q's admission is no
	// longer held by it for any reason.
	SteppedDown(q string)
	// Ticked: one admission tick's issue round trip took d.
	Ticked(d time.Duration)
	// Admitted counts one tick's tokens issued and slots expired (no-shows) in q.
	Admitted(q string, issued, expired int)
	// Punctual: a tick of q admitted with people waiting, interval after
	// the queue's last tick that admitted (queue.IssueResult.Interval).
	Punctual(q string, interval time.Duration)
	// LineTicked: one line of q, a queue split into lines, admitted issued
	// people this tick and has waiting left.
	LineTicked(q string, line int, issued int, waiting int64)
	// Held: q is open but admits nobody, for reason (queue.HeldOutboxBacklog).
	Held(q, reason string)
	// Resumed: q's admission is no longer held for reason.
	Resumed(q, reason string)
	// Drew: q's pre-queue was drawn, placed people given a place, in took
	// (from the start of this replica's draw).
	Drew(q string, placed int64, took time.Duration)
	// Rate: q admits at rate per second now (configured, or effective).
	Rate(q string, rate float64)
	// RateDecided counts one decision of q's adaptive controller on a new
	// health report (queue.RateDecision).
	RateDecided(q, decision string)
	// Published counts events the broker confirmed.
	Published(events []queue.Event)
	// Backlog: n events of q's outbox are not yet confirmed by the broker.
	Backlog(q string, n int64)
	// StoppedRelaying: this replica relays q's outbox no longer, so its
	// backlog is no longer known here.
	StoppedRelaying(q string)
	// Forget: q was deleted; nothing more is recorded for it, so what was
	// is dropped.
	Forget(q string)
}

// nopMetrics records nothing: the Dispatcher's Metrics when given none.
type nopMetrics struct{}

func (nopMetrics) Leading(string)                     {}
func (nopMetrics) SteppedDown(string)                 {}
func (nopMetrics) Ticked(time.Duration)               {}
func (nopMetrics) Admitted(string, int, int)          {}
func (nopMetrics) Punctual(string, time.Duration)     {}
func (nopMetrics) LineTicked(string, int, int, int64) {}
func (nopMetrics) Held(string, string)                {}
func (nopMetrics) Resumed(string, string)             {}
func (nopMetrics) Published([]queue.Event)            {}
func (nopMetrics) Drew(string, int64, time.Duration)  {}
func (nopMetrics) Rate(string, float64)               {}
func (nopMetrics) RateDecided(string, string)         {}
func (nopMetrics) Backlog(string, int64)              {}
func (nopMetrics) StoppedRelaying(string)             {}
func (nopMetrics) Forget(string)                      {}
