package stream

import (
	"encoding/json"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
)

var jsonMarshal = json.Marshal

// Metrics are the notification-service's series.
type Metrics struct {
	delivered, dropped, rejected *prometheus.CounterVec
	lag                          *prometheus.HistogramVec
}

// NewMetrics registers the series with reg; h feeds the open-streams gauge.
func NewMetrics(reg prometheus.Registerer, h *hub.Hub) *Metrics {
	ns, sub := "waitingroom", "sse"
	m := &Metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "events_delivered_total",
			Help: "Events written to streams, by event."}, []string{"event"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "clients_dropped_total",
			Help: "Streams dropped by the server: slow (buffer full) or write (socket stuck or gone)."}, []string{"reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "streams_rejected_total",
			Help: "Stream requests refused, by reason."}, []string{"reason"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "delivery_lag_seconds",
			Help:    "From the event's time (admission, position read) to its write on the stream.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"event"}),
	}
	reg.MustRegister(m.delivered, m.dropped, m.rejected, m.lag, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "streams_open", Help: "Open event streams on this replica.",
	}, func() float64 { return float64(h.Len()) }))
	return m
}

// DropHook counts streams the hub drops.
func (m *Metrics) DropHook(reason string) { m.dropped.WithLabelValues(reason).Inc() }
