package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// QueueLister reads the line lengths for the queue length gauge.
// redisstore.Store implements it.
type QueueLister interface {
	Queues(ctx context.Context) ([]string, error)
	Waiting(ctx context.Context, ids []string) (map[string]int64, error)
}

type metrics struct {
	enters     *prometheus.CounterVec
	positions  *prometheus.CounterVec
	challenges prometheus.Counter
}

func newMetrics(reg *prometheus.Registry, lister QueueLister, log *slog.Logger) *metrics {
	m := &metrics{
		enters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "waitingroom", Subsystem: "gateway", Name: "enter_total",
			Help: "Enter requests by outcome (waiting, admitted, full, closed, not_found, challenge_required, challenge_failed, rate_limited, unavailable, invalid, error).",
		}, []string{"outcome"}),
		positions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "waitingroom", Subsystem: "gateway", Name: "position_requests_total",
			Help: "Position requests by the state answered (or the error).",
		}, []string{"state"}),
	}
	m.challenges = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "waitingroom", Subsystem: "gateway", Name: "challenges_issued_total",
		Help: "Enter challenges (proof of work) handed out.",
	})
	reg.MustRegister(m.enters, m.positions, m.challenges)
	if lister != nil {
		reg.MustRegister(&queueCollector{lister: lister, log: log, desc: prometheus.NewDesc(
			"waitingroom_queue_waiting", "People waiting in each queue's line (ZCARD at scrape time).", []string{"queue"}, nil)})
	}
	return m
}

func (m *metrics) enterOutcome(outcome string) { m.enters.WithLabelValues(outcome).Inc() }

func (m *metrics) enter(st queue.Standing, err error) {
	if err == nil {
		m.enterOutcome(strings.ToLower(string(st.State)))
		return
	}
	m.enterOutcome(errorOutcome(err))
}

func (m *metrics) position(st queue.Standing, err error) {
	if err == nil {
		m.positions.WithLabelValues(strings.ToLower(string(st.State))).Inc()
		return
	}
	m.positions.WithLabelValues(errorOutcome(err)).Inc()
}

func errorOutcome(err error) string {
	switch {
	case errors.Is(err, queue.ErrFull):
		return "full"
	case errors.Is(err, queue.ErrClosed):
		return "closed"
	case errors.Is(err, queue.ErrNotFound):
		return "not_found"
	case errors.Is(err, queue.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, queue.ErrChallengeRequired):
		return "challenge_required"
	case errors.Is(err, queue.ErrChallengeFailed):
		return "challenge_failed"
	}
	return "error"
}

// queueCollector reads every queue's line length when Prometheus scrapes, so
// the gauge is exact even when nobody is polling a queue.
type queueCollector struct {
	lister QueueLister
	log    *slog.Logger
	desc   *prometheus.Desc
}

// maxCollectedQueues bounds the scrape's cost and the series count.
const maxCollectedQueues = 1000

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ids, err := c.lister.Queues(ctx)
	if err != nil {
		c.log.Warn("queue length gauge: list queues", "err", err)
		return
	}
	if len(ids) > maxCollectedQueues {
		ids = ids[:maxCollectedQueues]
	}
	n, err := c.lister.Waiting(ctx, ids)
	if err != nil {
		c.log.Warn("queue length gauge: read lengths", "err", err)
		return
	}
	for id, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), id)
	}
}
