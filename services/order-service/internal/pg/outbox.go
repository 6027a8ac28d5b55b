package pg

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/waitingroom/waitingroom/pkg/telemetry"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// insertEvent writes e in the transaction, with the trace context of the
// transaction's ctx (the request's).
func insertEvent(tx *gorm.DB, e order.OutboxEvent) error {
	return insertEvents(tx, []order.OutboxEvent{e}, []context.Context{tx.Statement.Context})
}

// insertEvents writes events with one statement, events[i] with the trace
// context of traces[i] (its own request's).
func insertEvents(tx *gorm.DB, events []order.OutboxEvent, traces []context.Context) error {
	args := make([]any, 0, 9*len(events))
	for i, e := range events {
		tp, ts := telemetry.Context(traces[i])
		args = append(args, e.EventID, attempt(e.Attempt), e.RoutingKey, e.Type, payload(e.Payload),
			e.OccurredAt.UTC(), tp, ts, e.QueueID)
	}
	return tx.Exec(`INSERT INTO outbox (event_id, attempt, routing_key, type, payload, occurred_at,
		traceparent, tracestate, queue_id) VALUES `+valueRows(len(events), "(?, ?, ?, ?, ?, ?, ?, ?, ?)"), args...).Error
}

// attempt is the outbox's attempt column: NULL for an event that resolves
// no attempt.
func attempt(id string) *string {
	if id == "" {
		return nil
	}
	return &id
}

// attemptTaken reports whether err is the outbox refusing a second event
// for one order attempt (outbox_attempt_key).
func attemptTaken(err error) bool {
	code, constraint := pgCode(err)
	return code == codeUniqueViolation && constraint == "outbox_attempt_key"
}

// payload keeps an empty body non-NULL (the column is NOT NULL).
func payload(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// AddEvent writes an event to the outbox on its own (for example
// OrderFailed(ABANDONED) for an expired lease), encoded by Encode. inserted
// is false when an event with that id is already there: callers may retry
// freely. An OrderFailed whose attempt committed its order is refused with
// order.ErrOrderPlaced; while that order's transaction is still open, the
// insert waits for it (the attempt's unique index), up to TxTimeout.
func (d *DB) AddEvent(ctx context.Context, ev order.Event) (bool, error) {
	e, err := Encode(ev)
	if err != nil {
		return false, err
	}
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	tp, ts := telemetry.Context(ctx)
	res := d.conn(tctx).Exec(`INSERT INTO outbox (event_id, attempt, routing_key, type, payload, occurred_at, traceparent, tracestate, queue_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_id) DO NOTHING`,
		e.EventID, attempt(e.Attempt), e.RoutingKey, e.Type, payload(e.Payload), e.OccurredAt.UTC(), tp, ts, e.QueueID)
	if attemptTaken(res.Error) {
		return false, fmt.Errorf("pg: add event %s: %w", e.EventID, order.ErrOrderPlaced)
	}
	if res.Error != nil {
		return false, wrap(ctx, "add event", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RelayBatch hands up to limit unsent events, oldest first, to publish and
// marks them sent when it returns nil. The rows stay locked (FOR UPDATE SKIP
// LOCKED) while publish runs, so concurrent relays take disjoint batches and
// no row is published by two relays at once. When publish fails, nothing is
// marked and its error is returned: the rows go out in a later batch (at
// least once; consumers dedupe by event id). Publish runs inside the
// transaction, so it must finish within TxTimeout; its ctx says when.
func (d *DB) RelayBatch(ctx context.Context, limit int, publish func(context.Context, []order.OutboxEvent) error) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var sent int
	var publishErr error
	err := d.conn(tctx).Transaction(func(tx *gorm.DB) error {
		var rows []outboxRow
		if err := tx.Raw(`SELECT id, event_id, routing_key, type, payload, occurred_at, traceparent, tracestate FROM outbox
			WHERE sent_at IS NULL ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`, limit).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		events := make([]order.OutboxEvent, len(rows))
		ids := make([]int64, len(rows))
		for i, r := range rows {
			events[i], ids[i] = r.event(), r.ID
		}
		if err := publish(tctx, events); err != nil {
			publishErr = err
			return err
		}
		if err := tx.Exec(`UPDATE outbox SET sent_at = now() WHERE id IN ?`, ids).Error; err != nil {
			return err
		}
		sent = len(rows)
		return nil
	})
	if publishErr != nil {
		return 0, publishErr // rolled back; the publisher's error as it is
	}
	if err != nil {
		// Published but not marked: the events go out again later.
		return 0, wrap(ctx, "relay outbox", err)
	}
	return sent, nil
}

// OutboxBacklog counts events not yet published (a gauge worth alerting on).
func (d *DB) OutboxBacklog(ctx context.Context) (int64, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var n int64
	if err := d.conn(tctx).Model(&outboxRow{}).Where("sent_at IS NULL").Count(&n).Error; err != nil {
		return 0, wrap(ctx, "outbox backlog", err)
	}
	return n, nil
}
