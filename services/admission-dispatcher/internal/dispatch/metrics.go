package dispatch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Metrics are the dispatcher's Prometheus series.
type Metrics struct {
	issued, expired, restored, published *prometheus.CounterVec
	tick                                 prometheus.Histogram
	leader, backlog, held                *prometheus.GaugeVec
}

// NewMetrics registers the series with reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	ns, sub := "waitingroom", "dispatcher"
	m := &Metrics{
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
			Help: "1 while an open queue admits nobody, by reason (OUTBOX_BACKLOG: the outbox is at OUTBOX_MAX_BACKLOG)."}, []string{"queue", "reason"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "leader",
			Help: "1 while this replica leads the queue."}, []string{"queue"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "outbox_backlog",
			Help: "Events in the queue's outbox not yet confirmed by the broker."}, []string{"queue"}),
	}
	if reg != nil {
		reg.MustRegister(m.issued, m.expired, m.restored, m.published, m.tick, m.leader, m.backlog, m.held)
	}
	return m
}

// Restored counts one handled OrderFailed.
func (m *Metrics) Restored(q string, o queue.RestoreOutcome) {
	m.restored.WithLabelValues(q, string(o)).Inc()
}

func (m *Metrics) countPublished(events []queue.Event) {
	for _, e := range events {
		m.published.WithLabelValues(e.Type).Inc()
	}
}

// forget drops a deleted queue's series, so a thousand short-lived queues do
// not leave a thousand series behind.
func (m *Metrics) forget(q string) {
	for _, v := range []*prometheus.CounterVec{m.issued, m.expired, m.restored} {
		v.DeletePartialMatch(prometheus.Labels{"queue": q})
	}
	for _, v := range []*prometheus.GaugeVec{m.leader, m.backlog, m.held} {
		v.DeletePartialMatch(prometheus.Labels{"queue": q})
	}
}
