package pg

import (
	"context"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Prune deletes outbox rows sent before sentBefore and Idempotency-Key rows
// created before keysBefore, at most batch rows per statement and per
// table, so no statement holds many row locks or runs long. It stops when a
// statement deletes less than a full batch, or when ctx ends. Unsent outbox
// rows are never deleted, whatever their age. Replicas may prune at the
// same time: rows another replica is deleting are skipped, not waited for.
func (d *DB) Prune(ctx context.Context, sentBefore, keysBefore time.Time, batch int) (order.Pruned, error) {
	var p order.Pruned
	if batch <= 0 {
		return p, nil
	}
	var err error
	if p.Outbox, err = d.pruneBatches(ctx, "prune outbox", `DELETE FROM outbox WHERE id IN (
		SELECT id FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ? LIMIT ? FOR UPDATE SKIP LOCKED)`,
		sentBefore.UTC(), batch); err != nil {
		return p, err
	}
	p.Idempotency, err = d.pruneBatches(ctx, "prune idempotency keys", `DELETE FROM idempotency WHERE (user_id, key) IN (
		SELECT user_id, key FROM idempotency WHERE created_at < ? LIMIT ? FOR UPDATE SKIP LOCKED)`,
		keysBefore.UTC(), batch)
	return p, err
}

func (d *DB) pruneBatches(ctx context.Context, op, stmt string, before time.Time, batch int) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		tctx, cancel := d.timeout(ctx)
		res := d.conn(tctx).Exec(stmt, before, batch)
		cancel()
		if res.Error != nil {
			return total, wrap(ctx, op, res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(batch) {
			return total, nil
		}
	}
	return total, wrap(ctx, op, ctx.Err())
}
