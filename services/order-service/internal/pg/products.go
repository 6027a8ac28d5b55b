package pg

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// UpsertProduct creates the product or replaces its queue, name, stock and
// price; UpdatedAt is the database's clock. created reports a new row.
func (d *DB) UpsertProduct(ctx context.Context, p order.Product) (order.Product, bool, error) {
	if p.ID == "" || p.QueueID == "" {
		return order.Product{}, false, errors.New("pg: upsert product: id and queue id are required")
	}
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var row productRow
	var created bool
	// xmax is 0 on a freshly inserted row version and set on an updated one:
	// one statement tells both apart without a race.
	err := d.conn(tctx).Raw(`
		INSERT INTO products (id, queue_id, name, stock, price_cents, updated_at)
		VALUES (?, ?, ?, ?, ?, now())
		ON CONFLICT (id) DO UPDATE SET queue_id = excluded.queue_id, name = excluded.name,
			stock = excluded.stock, price_cents = excluded.price_cents, updated_at = excluded.updated_at
		RETURNING id, queue_id, name, stock, price_cents, updated_at, (xmax = 0) AS created`,
		p.ID, p.QueueID, p.Name, p.Stock, p.PriceCents).Row().
		Scan(&row.ID, &row.QueueID, &row.Name, &row.Stock, &row.PriceCents, &row.UpdatedAt, &created)
	if code, _ := pgCode(err); code == codeCheckViolation {
		err = fmt.Errorf("stock and price must not be negative: %w", err)
	}
	if err != nil {
		return order.Product{}, false, wrap(ctx, "upsert product", err)
	}
	return row.product(), created, nil
}

// Product returns one product, or an error wrapping order.ErrProductNotFound.
func (d *DB) Product(ctx context.Context, id string) (order.Product, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var row productRow
	err := d.conn(tctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		err = fmt.Errorf("%w: %s", order.ErrProductNotFound, id)
	}
	if err != nil {
		return order.Product{}, wrap(ctx, "product", err)
	}
	return row.product(), nil
}

// Products returns the products of a queue, ordered by id.
func (d *DB) Products(ctx context.Context, queueID string) ([]order.Product, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var rows []productRow
	if err := d.conn(tctx).Where("queue_id = ?", queueID).Order("id").Find(&rows).Error; err != nil {
		return nil, wrap(ctx, "products", err)
	}
	out := make([]order.Product, len(rows))
	for i, r := range rows {
		out[i] = r.product()
	}
	return out, nil
}

// QueueIDs returns the queues this database sells in: those with at least
// one product, ordered by id.
func (d *DB) QueueIDs(ctx context.Context) ([]string, error) {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	var ids []string
	if err := d.conn(tctx).Model(&productRow{}).Distinct("queue_id").Order("queue_id").Pluck("queue_id", &ids).Error; err != nil {
		return nil, wrap(ctx, "queue ids", err)
	}
	return ids, nil
}
