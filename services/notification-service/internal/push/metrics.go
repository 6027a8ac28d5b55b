package push

import "github.com/prometheus/client_golang/prometheus"

// Metrics count the subscriptions and the pushes. A nil *Metrics counts
// nothing.
type Metrics struct {
	subscriptions *prometheus.CounterVec
	pushes        *prometheus.CounterVec
}

// NewMetrics registers the push metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		subscriptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "waitingroom_push_subscriptions_total",
			Help: "Web Push subscriptions saved, and those evicted for a user's newer device.",
		}, []string{"op"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "waitingroom_push_sends_total",
			Help: "Your-turn pushes by result: sent, gone (404/410, removed), refused, failed (given up), late (the entry ended first), duplicate (a redelivered event).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.subscriptions, m.pushes)
	return m
}

func (m *Metrics) subscribed(evicted int) {
	if m == nil {
		return
	}
	m.subscriptions.WithLabelValues("saved").Inc()
	m.subscriptions.WithLabelValues("evicted").Add(float64(evicted))
}

func (m *Metrics) result(r string) {
	if m != nil {
		m.pushes.WithLabelValues(r).Inc()
	}
}
