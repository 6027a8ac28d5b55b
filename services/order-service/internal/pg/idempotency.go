package pg

import (
	"context"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// inProgressLease is how long an unfinished Idempotency-Key row blocks
// retries. A request that died between Begin and Finish/Abandon (process
// killed) would otherwise block its key forever; a live request is long
// over by then (every database call is bounded by TxTimeout).
const inProgressLease = time.Minute

// BeginIdempotent claims (userID, key) for a request. fresh is true when
// this call claimed it: run the request, then FinishIdempotent or
// AbandonIdempotent. Otherwise res is the stored outcome to replay
// (res.Done) or says the first request is still running (!res.Done).
func (d *DB) BeginIdempotent(ctx context.Context, userID, key string) (res order.StoredAnswer, fresh bool, err error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	db := d.conn(tctx)
	// A row can vanish between the two statements (the first request
	// abandoned it): then claim again. Bounded, as a row cannot keep
	// vanishing without someone claiming it.
	for range 3 {
		// ON CONFLICT keeps a finished or live row; it takes over only an
		// unfinished row past its lease. One statement: no check-then-act.
		ins := db.Exec(`INSERT INTO idempotency (user_id, key, created_at) VALUES (?, ?, now())
			ON CONFLICT (user_id, key) DO UPDATE SET created_at = now()
			WHERE idempotency.status IS NULL AND idempotency.created_at < now() - make_interval(secs => ?)`,
			userID, key, inProgressLease.Seconds())
		if ins.Error != nil {
			return res, false, wrap(ctx, "begin idempotent", ins.Error)
		}
		if ins.RowsAffected == 1 {
			return res, true, nil
		}
		var rows []idempotencyRow
		if err := db.Where("user_id = ? AND key = ?", userID, key).Limit(1).Find(&rows).Error; err != nil {
			return res, false, wrap(ctx, "begin idempotent", err)
		}
		if len(rows) == 0 {
			continue
		}
		if rows[0].Status == nil {
			return order.StoredAnswer{}, false, nil
		}
		return order.StoredAnswer{Status: *rows[0].Status, Body: rows[0].Body, Done: true}, false, nil
	}
	return order.StoredAnswer{}, false, nil // churning: report in progress, the client retries
}

// LookupIdempotent reads the record for (userID, key) without claiming
// it: found is false when there is none; an unfinished one is reported as
// not Done (the client retries).
func (d *DB) LookupIdempotent(ctx context.Context, userID, key string) (res order.StoredAnswer, found bool, err error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var rows []idempotencyRow
	if err := d.conn(tctx).Where("user_id = ? AND key = ?", userID, key).Limit(1).Find(&rows).Error; err != nil {
		return res, false, wrap(ctx, "lookup idempotent", err)
	}
	if len(rows) == 0 {
		return res, false, nil
	}
	if rows[0].Status == nil {
		return order.StoredAnswer{}, true, nil
	}
	return order.StoredAnswer{Status: *rows[0].Status, Body: rows[0].Body, Done: true}, true, nil
}

// FinishIdempotent stores the outcome to replay for (userID, key). It
// upserts, so an outcome is kept even if the claim was lost meanwhile.
func (d *DB) FinishIdempotent(ctx context.Context, userID, key string, status int, body []byte) error {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	err := d.conn(tctx).Exec(`INSERT INTO idempotency (user_id, key, status, body, created_at)
		VALUES (?, ?, ?, ?, now())
		ON CONFLICT (user_id, key) DO UPDATE SET status = excluded.status, body = excluded.body`,
		userID, key, status, payload(body)).Error
	return wrap(ctx, "finish idempotent", err)
}

// AbandonIdempotent deletes an unfinished claim so the client may retry
// with the same key (the request failed in a way worth retrying: 503).
// A finished outcome is never deleted.
func (d *DB) AbandonIdempotent(ctx context.Context, userID, key string) error {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	err := d.conn(tctx).Exec(`DELETE FROM idempotency WHERE user_id = ? AND key = ? AND status IS NULL`,
		userID, key).Error
	return wrap(ctx, "abandon idempotent", err)
}
