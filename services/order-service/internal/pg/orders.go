package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// PlaceOrder takes p.Order's Quantity from the stock of its ProductID in
// its QueueID, stores the order, the outbox event p.Event builds from the
// stored order (encoded by Encode) and, with p.Key, the answer p.Answer
// builds, all in one transaction bounded by TxTimeout: either all are
// committed or none. Concurrent orders of one product share a transaction
// (group commit, up to Options.GroupCommit of them: see group.go), each
// with its own outcome. The order's ID is generated (UUIDv7) when empty;
// Status defaults to order.StatusCreated; CreatedAt is the database's
// clock, in UTC.
//
// Errors wrap order.ErrSoldOut (not enough stock), order.ErrOrderLimitReached
// (the person has MaxOrders orders in the queue already), order.ErrProductNotFound
// (no such product in this queue), order.ErrDuplicateToken (an order exists
// for its EntryTokenID), order.ErrAttemptFailed (an OrderFailed for the
// attempt o.ID is in the outbox: see Event.Attempt) or order.ErrUnavailable.
// A failure the database is known not to have committed (it answered with
// an error, or nothing was sent) also wraps order.ErrNothingStored; after
// any other (a timeout, a connection lost with the COMMIT out) the order
// may have committed.
func (d *DB) PlaceOrder(ctx context.Context, pl order.Placement) (order.Order, error) {
	o := pl.Order
	switch {
	case o.Quantity <= 0:
		// Checked here, not only by the orders CHECK: the stock UPDATE runs
		// first and would add stock for a negative quantity.
		return order.Order{}, fmt.Errorf("pg: place order: quantity %d must be positive", o.Quantity)
	case pl.Event == nil:
		return order.Order{}, errors.New("pg: place order: no event builder")
	case pl.Key != "" && pl.Answer == nil:
		return order.Order{}, errors.New("pg: place order: a key without an answer builder")
	}
	if o.ID == "" {
		id, err := uuid.NewV7() // time-ordered: index-friendly primary keys
		if err != nil {
			return order.Order{}, fmt.Errorf("pg: place order: %w", err)
		}
		o.ID = id.String()
	}
	if o.Status == "" {
		o.Status = order.StatusCreated
	}
	p := &placing{ctx: ctx, max: pl.MaxOrders, event: pl.Event, key: pl.Key, answer: pl.Answer,
		row: orderRow{ID: o.ID, UserID: o.UserID, QueueID: o.QueueID, ProductID: o.ProductID,
			Quantity: o.Quantity, EntryTokenID: o.EntryTokenID, Status: o.Status, Bypassed: o.Bypassed}}
	if o.IdempotencyKey != "" {
		p.row.IdempotencyKey = &o.IdempotencyKey
	}
	if d.group != nil {
		return d.group.place(p)
	}
	return d.placeOne(ctx, p)
}

// placeOne is one order's own transaction.
func (d *DB) placeOne(ctx context.Context, p *placing) (order.Order, error) {
	row := p.row
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var stored order.Order
	err := d.conn(tctx).Transaction(func(tx *gorm.DB) error {
		// The person's count first: one at the limit never waits on the
		// product row every buyer locks.
		if err := countOrder(tx, row, p.max); err != nil {
			return err
		}
		if err := takeStock(tx, row); err != nil {
			return err
		}
		err := tx.Raw(`
			INSERT INTO orders (id, user_id, queue_id, product_id, quantity, entry_token_id, idempotency_key, status, bypassed)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			RETURNING created_at`,
			row.ID, row.UserID, row.QueueID, row.ProductID, row.Quantity, row.EntryTokenID,
			row.IdempotencyKey, row.Status, row.Bypassed).Row().Scan(&row.CreatedAt)
		if err != nil {
			return insertOrderErr(err)
		}
		stored = row.order()
		e, err := Encode(p.event(stored))
		if err != nil {
			return err
		}
		if err := insertEvent(tx, e); err != nil {
			if attemptTaken(err) {
				// The attempt was recorded failed while this transaction
				// was on its way: the token is going back, so nothing of
				// the order may stay.
				return fmt.Errorf("%w: order %s", order.ErrAttemptFailed, row.ID)
			}
			return err
		}
		if p.key != "" {
			return keepAnswers(tx, []*placing{p}, []int{0}, []order.Order{stored})
		}
		return nil
	})
	if err != nil {
		if nothingStored(err) {
			return order.Order{}, fmt.Errorf("%w (%w)", wrap(ctx, "place order", err), order.ErrNothingStored)
		}
		return order.Order{}, wrap(ctx, "place order", err)
	}
	return stored, nil
}

// takeStock decrements the stock if there is enough of it. The UPDATE's row
// lock is all the serialization needed: concurrent orders on the product
// wait for it, then re-check stock >= quantity against the committed value,
// so stock never goes below zero (the CHECK would refuse it anyway).
func takeStock(tx *gorm.DB, o orderRow) error {
	res := tx.Exec(`UPDATE products SET stock = stock - ?, updated_at = now()
		WHERE id = ? AND queue_id = ? AND stock >= ?`, o.Quantity, o.ProductID, o.QueueID, o.Quantity)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 1 {
		return nil
	}
	// Nothing updated: tell a missing product from an empty shelf. Only
	// this (rarer) path pays for the second query.
	var exists bool
	if err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM products WHERE id = ? AND queue_id = ?)`,
		o.ProductID, o.QueueID).Row().Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("%w: %s in queue %s", order.ErrProductNotFound, o.ProductID, o.QueueID)
	}
	return fmt.Errorf("%w: %s", order.ErrSoldOut, o.ProductID)
}

// countOrder adds the order to its person's count in the queue, refusing it
// with order.ErrOrderLimitReached when they have limit orders already (0:
// no limit). The upsert holds the person's row lock to the end of the
// transaction, so of two concurrent orders at the limit one waits and then
// fails; other people never wait on it.
func countOrder(tx *gorm.DB, o orderRow, limit int64) error {
	var n int64
	err := tx.Raw(`INSERT INTO user_order_counts AS c (queue_id, user_id, orders) VALUES (?, ?, 1)
		ON CONFLICT (queue_id, user_id) DO UPDATE SET orders = c.orders + 1
		WHERE ? = 0 OR c.orders < ?
		RETURNING orders`, o.QueueID, o.UserID, limit, limit).Row().Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %d in queue %s", order.ErrOrderLimitReached, limit, o.QueueID)
	}
	return err
}

func insertOrderErr(err error) error {
	code, constraint := pgCode(err)
	if code != codeUniqueViolation {
		return err
	}
	switch constraint {
	case "orders_entry_token_id_key":
		return fmt.Errorf("%w: %w", order.ErrDuplicateToken, err)
	case "orders_user_idempotency_key_key":
		// The same user and Idempotency-Key already made an order: the
		// first request owns the outcome.
		return fmt.Errorf("%w: an order exists for this key: %w", order.ErrIdempotencyInProgress, err)
	}
	return err
}

// Order returns one order, or an error wrapping order.ErrOrderNotFound.
func (d *DB) Order(ctx context.Context, id string) (order.Order, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var row orderRow
	err := d.conn(tctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		err = fmt.Errorf("%w: %s", order.ErrOrderNotFound, id)
	}
	if err != nil {
		return order.Order{}, wrap(ctx, "order", err)
	}
	return row.order(), nil
}

// OrderByToken returns the order placed with an entry token, if any: how an
// expired inflight lease is settled (order found) or restored (none).
func (d *DB) OrderByToken(ctx context.Context, tokenID string) (order.Order, bool, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var rows []orderRow
	if err := d.conn(tctx).Where("entry_token_id = ?", tokenID).Limit(1).Find(&rows).Error; err != nil {
		return order.Order{}, false, wrap(ctx, "order by token", err)
	}
	if len(rows) == 0 {
		return order.Order{}, false, nil
	}
	return rows[0].order(), true, nil
}
