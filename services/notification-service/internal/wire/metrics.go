package wire

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// Metrics are the notification-service's Prometheus series: stream.Metrics
// for the stream Service, and the open-streams gauge.
type Metrics struct {
	delivered, dropped, rejected *prometheus.CounterVec
	lag                          *prometheus.HistogramVec
}

var _ stream.Metrics = (*Metrics)(nil)

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

// Delivered counts a live event written to a stream.
func (m *Metrics) Delivered(event string) { m.delivered.WithLabelValues(event).Inc() }

// Lag observes an event's delivery lag.
func (m *Metrics) Lag(event string, d time.Duration) {
	m.lag.WithLabelValues(event).Observe(d.Seconds())
}

// Dropped counts a stream the server dropped.
func (m *Metrics) Dropped(reason string) { m.dropped.WithLabelValues(reason).Inc() }

// Rejected counts a refused stream request.
func (m *Metrics) Rejected(reason string) { m.rejected.WithLabelValues(reason).Inc() }
