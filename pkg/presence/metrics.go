package presence

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// promMetrics are a Book's Prometheus series.
type promMetrics struct {
	seen, cameBack, untracked prometheus.Counter
	ok, failed                prometheus.Counter
	dropped                   prometheus.Counter
}

// NewMetrics registers a Book's series with reg:
// waitingroom_presence_sightings_total{result} (seen: a person waiting
// seen; came_back: an away person back at their place; untracked: nobody
// the line tracks), waitingroom_presence_batches_total{result} (ok,
// error: one a queue a send) and waitingroom_presence_dropped_total.
func NewMetrics(reg prometheus.Registerer) Metrics {
	sightings := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "waitingroom", Subsystem: "presence", Name: "sightings_total",
		Help: "Sightings sent to Redis by what they did: seen (a person waiting), came_back (an away person back at their place), untracked (nobody the line tracks)."},
		[]string{"result"})
	batches := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "waitingroom", Subsystem: "presence", Name: "batches_total",
		Help: "Batches of sightings sent (one a queue a second) by result: ok or error."}, []string{"result"})
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "waitingroom", Subsystem: "presence", Name: "dropped_total",
		Help: "Sightings dropped because the replica already held presence.MaxPending unsent ones."})
	reg.MustRegister(sightings, batches, dropped)
	return &promMetrics{
		seen: sightings.WithLabelValues("seen"), cameBack: sightings.WithLabelValues("came_back"),
		untracked: sightings.WithLabelValues("untracked"),
		ok:        batches.WithLabelValues("ok"), failed: batches.WithLabelValues("error"), dropped: dropped,
	}
}

func (m *promMetrics) Sent(_ string, users int, got queue.Sightings, err error) {
	if err != nil {
		m.failed.Inc()
		return
	}
	m.ok.Inc()
	m.seen.Add(float64(got.Seen))
	m.cameBack.Add(float64(got.CameBack))
	m.untracked.Add(float64(max(0, int64(users)-got.Seen-got.CameBack)))
}

func (m *promMetrics) Dropped(n int) { m.dropped.Add(float64(n)) }
