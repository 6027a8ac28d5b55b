package pg

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
)

// The outbox's type names of the order events the roll-up counts.
var (
	typeOrderCreated = events.TypeName(&waitingroomv1.OrderCreated{})
	typeOrderFailed  = events.TypeName(&waitingroomv1.OrderFailed{})
)

// SaveMinute stores one part of a line's minute once, by its event id: a
// redelivered QueueMinute is a no-op.
func (d *DB) SaveMinute(ctx context.Context, p history.Part) (bool, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	c := p.Counts
	res := d.conn(tctx).Exec(`
		INSERT INTO queue_minutes (event_id, queue_id, line_id, minute, arrivals, admitted, expired_unused, left_line, abandoned,
			wait_histogram, wait_max_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::bigint[], ?)
		ON CONFLICT (event_id) DO NOTHING`,
		p.EventID, p.QueueID, p.LineID, p.Minute.UTC(), c.Arrivals, c.Admitted, c.ExpiredUnused, c.Left, c.Abandoned,
		arrayLiteral(c.WaitHistogram), c.WaitMax.Milliseconds())
	if res.Error != nil {
		return false, wrap(ctx, "save queue minute", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RollUpOrders counts each queue's OrderCreated and OrderFailed rows of
// the outbox per minute of their time, for the minutes in [from, to), and
// writes the counts over what an earlier pass wrote: any replica may run
// it, as often as it likes, with the same result.
func (d *DB) RollUpOrders(ctx context.Context, from, to time.Time) (int64, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	res := d.conn(tctx).Exec(`
		INSERT INTO order_minutes (queue_id, minute, created, failed)
		SELECT queue_id, date_trunc('minute', occurred_at),
			count(*) FILTER (WHERE type = ?), count(*) FILTER (WHERE type = ?)
		FROM outbox
		WHERE queue_id <> '' AND occurred_at >= ? AND occurred_at < ?
		GROUP BY 1, 2
		ON CONFLICT (queue_id, minute) DO UPDATE SET created = EXCLUDED.created, failed = EXCLUDED.failed, rolled_at = now()`,
		typeOrderCreated, typeOrderFailed, from.UTC(), to.UTC())
	if res.Error != nil {
		return 0, wrap(ctx, "roll up orders", res.Error)
	}
	return res.RowsAffected, nil
}

// Minutes returns queue q's minutes in [from, to) that have anything: its
// lines' parts added up, with the orders rolled up, in order.
func (d *DB) Minutes(ctx context.Context, q string, from, to time.Time) ([]history.Minute, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	by := map[int64]*history.Minute{}
	get := func(t time.Time) *history.Minute {
		t = t.UTC()
		m, ok := by[t.Unix()]
		if !ok {
			m = &history.Minute{Start: t}
			by[t.Unix()] = m
		}
		return m
	}
	rows, err := d.conn(tctx).Raw(`
		SELECT minute, arrivals, admitted, expired_unused, left_line, abandoned, wait_histogram::text, wait_max_ms
		FROM queue_minutes WHERE queue_id = ? AND minute >= ? AND minute < ?`, q, from.UTC(), to.UTC()).Rows()
	if err != nil {
		return nil, wrap(ctx, "read queue minutes", err)
	}
	defer rows.Close()
	for rows.Next() {
		var at time.Time
		var c queue.MinuteCounts
		var hist string
		var maxMs int64
		if err := rows.Scan(&at, &c.Arrivals, &c.Admitted, &c.ExpiredUnused, &c.Left, &c.Abandoned, &hist, &maxMs); err != nil {
			return nil, wrap(ctx, "read queue minutes", err)
		}
		c.WaitHistogram, c.WaitMax = parseArray(hist), time.Duration(maxMs)*time.Millisecond
		m := get(at)
		m.Counts = history.AddCounts(m.Counts, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, "read queue minutes", err)
	}
	orders, err := d.conn(tctx).Raw(`SELECT minute, created, failed FROM order_minutes WHERE queue_id = ? AND minute >= ? AND minute < ?`,
		q, from.UTC(), to.UTC()).Rows()
	if err != nil {
		return nil, wrap(ctx, "read order minutes", err)
	}
	defer orders.Close()
	for orders.Next() {
		var at time.Time
		var created, failed int64
		if err := orders.Scan(&at, &created, &failed); err != nil {
			return nil, wrap(ctx, "read order minutes", err)
		}
		m := get(at)
		m.OrdersCreated, m.OrdersFailed = created, failed
	}
	if err := orders.Err(); err != nil {
		return nil, wrap(ctx, "read order minutes", err)
	}
	out := make([]history.Minute, 0, len(by))
	for _, m := range by {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b history.Minute) int { return a.Start.Compare(b.Start) })
	return out, nil
}

// PruneHistory deletes the minutes (of both tables) before before, at most
// batch rows per statement.
func (d *DB) PruneHistory(ctx context.Context, before time.Time, batch int) (int64, error) {
	n, err := d.pruneBatches(ctx, "prune queue minutes", `DELETE FROM queue_minutes WHERE event_id IN (
		SELECT event_id FROM queue_minutes WHERE minute < ? LIMIT ? FOR UPDATE SKIP LOCKED)`, before.UTC(), batch)
	if err != nil {
		return n, err
	}
	m, err := d.pruneBatches(ctx, "prune order minutes", `DELETE FROM order_minutes WHERE (queue_id, minute) IN (
		SELECT queue_id, minute FROM order_minutes WHERE minute < ? LIMIT ? FOR UPDATE SKIP LOCKED)`, before.UTC(), batch)
	return n + m, err
}

// arrayLiteral is a bigint[] literal ("{1,0,3}"): passed as text and cast,
// since a Go slice argument is a list to gorm.
func arrayLiteral(ns []int64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// parseArray reads a bigint[]'s text form.
func parseArray(s string) []int64 {
	s = strings.Trim(s, "{}")
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := make([]int64, len(parts))
	for i, p := range parts {
		out[i], _ = strconv.ParseInt(p, 10, 64)
	}
	return out
}
