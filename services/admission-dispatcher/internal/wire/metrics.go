package wire

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
)

// metrics are the dispatcher's Prometheus series: dispatch.Metrics for the
// Dispatcher, restore.Metrics for the OrderFailed handler.
type metrics struct {
	issued, expired, restored, published, drawn, decided *prometheus.CounterVec
	tick, draw                                           prometheus.Histogram
	interval                                             *prometheus.HistogramVec
	leader, backlog, held, admitRate                     *prometheus.GaugeVec
	// A queue split into lines: each line's admissions and length.
	lineIssued  *prometheus.CounterVec
	lineWaiting *prometheus.GaugeVec
}

var (
	_ dispatch.Metrics = (*metrics)(nil)
	_ restore.Metrics  = (*metrics)(nil)
)

// newMetrics registers the series with reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	ns, sub := "waitingroom", "dispatcher"
	m := &metrics{
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tokens_issued_total",
			Help: "Entry tokens issued."}, []string{"queue"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tokens_expired_total",
			Help: "Slots pruned because their token went unused (no-shows)."}, []string{"queue"}),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tokens_restored_total",
			Help: "OrderFailed events handled, by outcome (RESTORED, EXPIRED, FREED, DUPLICATE)."}, []string{"queue", "outcome"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "events_published_total",
			Help: "Outbox events confirmed by the broker, by type."}, []string{"type"}),
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "tick_duration_seconds",
			Help: "Duration of one admission tick (the issue script round trip, pool wait included).", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "admission_held",
			Help: "1 while an open queue admits nobody, by reason (OUTBOX_BACKLOG: the outbox is at OUTBOX_MAX_BACKLOG; DRAW: the pre-queue is being drawn at the start time)."}, []string{"queue", "reason"}),
		drawn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "draw_placed_total",
			Help: "Pre-queued people given a place by the draw at a queue's start time."}, []string{"queue"}),
		decided: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rate_decisions_total",
			Help: "Decisions of an ADAPTIVE queue's rate controller on a new order-service health report (INCREASE, AT_MAX, DECREASE, AT_MIN, COOLDOWN, HOLD_STALE)."}, []string{"queue", "decision"}),
		admitRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "admission_rate_per_second",
			Help: "The rate the queue admits at now, on the queues this replica leads: the configured one, or an ADAPTIVE queue's effective one."}, []string{"queue"}),
		draw: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "draw_duration_seconds",
			Help: "Duration of one pre-queue draw by this replica (admission is held meanwhile).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader",
			Help: "1 while this replica leads the queue."}, []string{"queue"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "outbox_backlog",
			Help: "Events in the queue's outbox not yet confirmed by the broker."}, []string{"queue"}),
	}
	m.lineIssued = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "line_tokens_issued_total",
		Help: "Entry tokens issued, by line, in queues split into lines (shards > 1); the queue's total is tokens_issued_total."}, []string{"queue", "line"})
	m.lineWaiting = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "line_waiting",
		Help: "People waiting in each line of a queue split into lines, after the last tick, on the queues this replica leads."}, []string{"queue", "line"})
	m.interval = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "admission_interval_seconds",
		Help:    "Time between two admitting ticks of a queue with people waiting, whichever leader ran them: the head of the line waits this long for its turn. Over 0.2 s (two ticks) is late: a held or missed tick, a leader change.",
		Buckets: []float64{.05, .1, .15, .2, .25, .3, .5, 1, 2, 5, 10}}, []string{"queue"})
	reg.MustRegister(m.interval)
	reg.MustRegister(m.issued, m.expired, m.restored, m.published, m.tick, m.leader, m.backlog, m.held, m.drawn, m.draw, m.decided, m.admitRate,
		m.lineIssued, m.lineWaiting)
	return m
}

// Restored counts one handled OrderFailed.
func (m *metrics) Restored(q string, o queue.RestoreOutcome) {
	m.restored.WithLabelValues(q, string(o)).Inc()
}

func (m *metrics) Leading(q string) { m.leader.WithLabelValues(q).Set(1) }

func (m *metrics) SteppedDown(q string) {
	m.leader.WithLabelValues(q).Set(0)
	m.admitRate.DeleteLabelValues(q)
	m.held.DeletePartialMatch(prometheus.Labels{"queue": q})
	m.lineWaiting.DeletePartialMatch(prometheus.Labels{"queue": q})
}

func (m *metrics) Ticked(d time.Duration) { m.tick.Observe(d.Seconds()) }

func (m *metrics) Admitted(q string, issued, expired int) {
	m.issued.WithLabelValues(q).Add(float64(issued))
	m.expired.WithLabelValues(q).Add(float64(expired))
}

func (m *metrics) Punctual(q string, interval time.Duration) {
	m.interval.WithLabelValues(q).Observe(interval.Seconds())
}

func (m *metrics) LineTicked(q string, line int, issued int, waiting int64) {
	l := strconv.Itoa(line)
	m.lineIssued.WithLabelValues(q, l).Add(float64(issued))
	m.lineWaiting.WithLabelValues(q, l).Set(float64(waiting))
}

func (m *metrics) Held(q, reason string)    { m.held.WithLabelValues(q, reason).Set(1) }
func (m *metrics) Resumed(q, reason string) { m.held.WithLabelValues(q, reason).Set(0) }

func (m *metrics) Rate(q string, rate float64) { m.admitRate.WithLabelValues(q).Set(rate) }

func (m *metrics) RateDecided(q, decision string) { m.decided.WithLabelValues(q, decision).Inc() }

func (m *metrics) Drew(q string, placed int64, took time.Duration) {
	m.drawn.WithLabelValues(q).Add(float64(placed))
	m.draw.Observe(took.Seconds())
}

func (m *metrics) Published(events []queue.Event) {
	for _, e := range events {
		m.published.WithLabelValues(e.Type).Inc()
	}
}

func (m *metrics) Backlog(q string, n int64) { m.backlog.WithLabelValues(q).Set(float64(n)) }
func (m *metrics) StoppedRelaying(q string)  { m.backlog.DeleteLabelValues(q) }

// Forget drops a deleted queue's series, so a thousand short-lived queues
// do not leave a thousand series behind.
func (m *metrics) Forget(q string) {
	for _, v := range []*prometheus.CounterVec{m.issued, m.expired, m.restored, m.drawn, m.decided, m.lineIssued} {
		v.DeletePartialMatch(prometheus.Labels{"queue": q})
	}
	for _, v := range []*prometheus.GaugeVec{m.leader, m.backlog, m.held, m.admitRate, m.lineWaiting} {
		v.DeletePartialMatch(prometheus.Labels{"queue": q})
	}
	m.interval.DeletePartialMatch(prometheus.Labels{"queue": q})
}
