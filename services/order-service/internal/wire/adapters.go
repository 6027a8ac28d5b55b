package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// publisher sends outbox events through the broker with confirms.
type publisher struct{ pub *broker.Publisher }

func (p publisher) PublishEvents(ctx context.Context, evs []order.OutboxEvent) error {
	out := make([]broker.Event, 0, len(evs))
	for _, e := range evs {
		msg, err := events.Decode(e.Type, e.Payload)
		if err != nil {
			return fmt.Errorf("outbox event %s: %w", e.EventID, err)
		}
		out = append(out, broker.Event{ID: e.EventID, RoutingKey: e.RoutingKey, Time: e.OccurredAt, Message: msg})
	}
	return p.pub.Publish(ctx, out...)
}

// PublishEvent publishes one domain event as the outbox would have stored
// it (pg.Encode): the fallback when the outbox is what failed.
func (p publisher) PublishEvent(ctx context.Context, e order.Event) error {
	ob, err := pg.Encode(e)
	if err != nil {
		return err
	}
	return p.PublishEvents(ctx, []order.OutboxEvent{ob})
}

// timedRepo measures the order transaction.
type timedRepo struct {
	order.Repo
	tx *prometheus.HistogramVec
}

func (r timedRepo) PlaceOrder(ctx context.Context, o order.Order, ev func(order.Order) order.Event) (order.Order, error) {
	start := time.Now()
	out, err := r.Repo.PlaceOrder(ctx, o, ev)
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

type serviceMetrics struct {
	tx       *prometheus.HistogramVec
	consumed *prometheus.CounterVec
	backlog  prometheus.Gauge
	reaped   *prometheus.CounterVec
	pruned   *prometheus.CounterVec
}

func newServiceMetrics(reg prometheus.Registerer) *serviceMetrics {
	ns, sub := "waitingroom", "orders"
	m := &serviceMetrics{
		tx: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "transaction_duration_seconds",
			Help:    "The order transaction (stock decrement, order and outbox insert), by result.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"result"}),
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "token_consume_total",
			Help: "Entry token consume attempts by outcome (ok, invalid, not_active, unavailable, error)."}, []string{"outcome"}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "outbox_backlog",
			Help: "Order events in the Postgres outbox not yet confirmed by the broker."}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "reaped_total",
			Help: "Overdue inflight tokens the reaper handled, by action (settled, abandoned)."}, []string{"action"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retention_deleted_rows_total",
			Help: "Rows the retention job deleted, by table (outbox, idempotency)."}, []string{"table"}),
	}
	reg.MustRegister(m.tx, m.consumed, m.backlog, m.reaped, m.pruned)
	return m
}
