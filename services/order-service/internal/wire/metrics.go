package wire

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// metrics are the order-service's Prometheus series: order.Metrics for the
// Service and its loops, and the series of the port decorators below.
type metrics struct {
	requests, consumed, reaped, pruned *prometheus.CounterVec
	health                             *prometheus.CounterVec
	tx                                 *prometheus.HistogramVec
	statements                         prometheus.Histogram
	groupOrders, groupWait             prometheus.Histogram
	backlog                            prometheus.Gauge
}

var _ order.Metrics = (*metrics)(nil)

// newMetrics registers the series with reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	ns, sub := "waitingroom", "orders"
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "Order requests by outcome (created, bypassed (created without an entry token while Redis was unreachable, the queue failing OPEN), sold_out, order_limit, conflict, invalid_token, not_active, rate_limited, invalid, unavailable, replayed, error)."}, []string{"outcome"}),
		tx: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "transaction_duration_seconds",
			Help:    "The order transaction (stock decrement, order and outbox insert), by result.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"result"}),
		statements: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "sql_statement_duration_seconds",
			Help:    "Every SQL statement the order-service sends, from send to answer (slow ones are logged at debug level from 200 ms, as warnings from DB_SLOW_STATEMENT_WARN).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		groupOrders: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "group_commit_orders",
			Help:    "Orders of one product that shared a transaction and commit (at most ORDER_GROUP_COMMIT).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000}}),
		groupWait: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "group_commit_wait_seconds",
			Help:    "How long the first order of a shared transaction waited for it to start (the product's transaction before it).",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}),
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "token_consume_total",
			Help: "Entry token consume attempts by outcome (ok, invalid, not_active, unavailable, error)."}, []string{"outcome"}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "outbox_backlog",
			Help: "Order events in the Postgres outbox not yet confirmed by the broker."}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "reaped_total",
			Help: "Overdue inflight tokens the reaper handled, by action (settled, abandoned)."}, []string{"action"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retention_deleted_rows_total",
			Help: "Rows the retention job deleted, by table (outbox, idempotency)."}, []string{"table"}),
		health: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "health_reports_total",
			Help: "Per-queue order health reports (order.health) by result: published, or dropped (the publish failed; never retried)."}, []string{"result"}),
	}
	reg.MustRegister(m.requests, m.tx, m.statements, m.groupOrders, m.groupWait, m.consumed, m.backlog, m.reaped, m.pruned, m.health)
	return m
}

func (m *metrics) Requested(outcome string) { m.requests.WithLabelValues(outcome).Inc() }

// batched observes one shared order transaction (pg.Options.Batched).
func (m *metrics) batched(orders int, waited time.Duration) {
	m.groupOrders.Observe(float64(orders))
	m.groupWait.Observe(waited.Seconds())
}

func (m *metrics) Reaped(r order.ReapResult) {
	m.reaped.WithLabelValues("settled").Add(float64(r.Settled))
	m.reaped.WithLabelValues("abandoned").Add(float64(r.Abandoned))
}

func (m *metrics) Pruned(p order.Pruned) {
	m.pruned.WithLabelValues("outbox").Add(float64(p.Outbox))
	m.pruned.WithLabelValues("idempotency").Add(float64(p.Idempotency))
}

func (m *metrics) Backlog(n int64) { m.backlog.Set(float64(n)) }

func (m *metrics) HealthReports(n int, published bool) {
	result := "dropped"
	if published {
		result = "published"
	}
	m.health.WithLabelValues(result).Add(float64(n))
}

// timedRepo measures the order transaction.
type timedRepo struct {
	order.Repo
	tx *prometheus.HistogramVec
}

func (r timedRepo) PlaceOrder(ctx context.Context, p order.Placement) (order.Order, error) {
	start := time.Now()
	out, err := r.Repo.PlaceOrder(ctx, p)
	result := "committed"
	if err != nil {
		result = "failed"
	}
	r.tx.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return out, err
}

// countedTokens counts consume outcomes.
type countedTokens struct {
	order.Tokens
	consumed *prometheus.CounterVec
}

func (t countedTokens) Consume(ctx context.Context, q, user, secret, orderID string, lease, grace time.Duration) (queue.Consumed, error) {
	c, err := t.Tokens.Consume(ctx, q, user, secret, orderID, lease, grace)
	t.consumed.WithLabelValues(consumeOutcome(err)).Inc()
	return c, err
}

func consumeOutcome(err error) string {
	var na *queue.NotActiveError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, queue.ErrInvalidToken):
		return "invalid"
	case errors.As(err, &na):
		return "not_active"
	case errors.Is(err, queue.ErrUnavailable):
		return "unavailable"
	}
	return "error"
}

// repo and tokens are the ports the Service gets: measured by the
// decorators above.
func (m *metrics) repo(r order.Repo) order.Repo { return timedRepo{Repo: r, tx: m.tx} }
func (m *metrics) tokens(t order.Tokens) order.Tokens {
	return countedTokens{Tokens: t, consumed: m.consumed}
}
