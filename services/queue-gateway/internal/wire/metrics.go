package wire

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
)

// Metrics are the gateway's Prometheus series: app.Metrics for the
// Service's requests.
type Metrics struct {
	enters, positions, reads *prometheus.CounterVec
	challenges               prometheus.Counter
	// The per-request series looked up once: a poll answered from the
	// frontier counts twice, and WithLabelValues hashes and locks.
	positionSeries, readSeries series
}

// series are a counter vector's children for the label values known up
// front; another value is looked up in the vector.
type series struct {
	vec   *prometheus.CounterVec
	known map[string]prometheus.Counter
}

func newSeries(vec *prometheus.CounterVec, values ...string) series {
	s := series{vec: vec, known: make(map[string]prometheus.Counter, len(values))}
	for _, v := range values {
		s.known[v] = vec.WithLabelValues(v)
	}
	return s
}

func (s series) inc(value string) {
	if c, ok := s.known[value]; ok {
		c.Inc()
		return
	}
	s.vec.WithLabelValues(value).Inc()
}

var _ app.Metrics = (*Metrics)(nil)

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	ns, sub := "waitingroom", "gateway"
	m := &Metrics{
		enters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "enter_total",
			Help: "Enter requests by outcome (waiting, admitted, bypass, full, closed, not_found, challenge_required, challenge_failed, rate_limited, unavailable, invalid, error)."}, []string{"outcome"}),
		positions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "position_requests_total",
			Help: "Position requests by the state answered (or the error)."}, []string{"state"}),
		challenges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "challenges_issued_total",
			Help: "Enter challenges (proof of work) handed out."}),
	}
	m.reads = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "position_reads_total",
		Help: "Position requests by where the answer came from: frontier (memory, a ticket far from the front) or store (Redis)."}, []string{"source"})
	reg.MustRegister(m.enters, m.positions, m.challenges, m.reads)
	m.positionSeries = newSeries(m.positions, app.PositionOutcomes()...)
	m.readSeries = newSeries(m.reads, app.PositionSources()...)
	return m
}

// Entered counts an enter request's outcome.
func (m *Metrics) Entered(outcome string) { m.enters.WithLabelValues(outcome).Inc() }

// Positioned counts a position request's outcome.
func (m *Metrics) Positioned(outcome string) { m.positionSeries.inc(outcome) }

// PositionRead counts where a position answer came from.
func (m *Metrics) PositionRead(source string) { m.readSeries.inc(source) }

// ChallengeIssued counts a challenge handed out.
func (m *Metrics) ChallengeIssued() { m.challenges.Inc() }

// maxCollectedQueues bounds the scrape's cost and the series count.
const maxCollectedQueues = 1000

// RegisterQueueLengths adds the waitingroom_queue_waiting gauge to reg,
// read through svc when Prometheus scrapes, so it is exact even when nobody
// is polling a queue.
func RegisterQueueLengths(reg prometheus.Registerer, svc *app.Service, log *slog.Logger) {
	reg.MustRegister(&queueLengths{svc: svc, log: log, desc: prometheus.NewDesc(
		"waitingroom_queue_waiting", "People waiting in each queue's line (ZCARD at scrape time).", []string{"queue"}, nil)})
}

type queueLengths struct {
	svc  *app.Service
	log  *slog.Logger
	desc *prometheus.Desc
}

func (c *queueLengths) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *queueLengths) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := c.svc.Lengths(ctx, maxCollectedQueues)
	if err != nil {
		c.log.Warn("queue length gauge", "err", err)
		return
	}
	for id, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), id)
	}
}
