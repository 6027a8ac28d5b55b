package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// Group commit: the orders of one product wait for its row lock one after
// another, each with its own transaction and commit, so a flash sale (one
// product) runs at one commit per order. Here the orders that arrive for a
// product while its transaction runs share the next one: the product row
// is locked once, the stock is handed out in arrival order, and the
// orders, their outbox rows and idempotency answers are written with one
// statement each and one commit.
//
// A lone order does not wait for company: the first order of an idle
// product starts a transaction at once, and an order waits for the
// product's transactions before its own: one, while fewer than GroupCommit
// orders are waiting (each bounded by TxTimeout). A batch is at most
// Options.GroupCommit orders, and never holds two orders of one person (the
// second starts the next batch), so the per-person limit is decided from
// counts read under their row locks. A batch whose commit failed for one
// order's sake (its entry token or Idempotency-Key used, its attempt
// recorded failed, a race on a person's count) is run again one order a
// transaction, so each order gets its own answer; every other failure is
// every order's.

// placing is one order on its way through PlaceOrder.
type placing struct {
	ctx     context.Context // the caller's: its trace context, and whether it still waits
	row     orderRow
	max     int64
	event   func(order.Order) order.Event
	key     string
	answer  func(order.Order) order.StoredAnswer
	arrived time.Time

	taken  bool // in a batch: its caller waits for the outcome
	done   chan struct{}
	stored order.Order
	err    error
}

// shelf is one product of one queue: what a batch shares.
type shelf struct{ queue, product string }

// committer batches each product's concurrent orders.
type committer struct {
	d   *DB
	max int

	mu      sync.Mutex
	waiting map[shelf][]*placing
}

func newCommitter(d *DB, max int) *committer {
	return &committer{d: d, max: max, waiting: map[shelf][]*placing{}}
}

// place queues p behind its product's running transaction, or starts one,
// and waits for p's outcome. A caller that gives up before its order is in
// a transaction leaves with nothing stored; once it is in one, the outcome
// is waited for (at most TxTimeout), so what the caller is told is what
// happened.
func (c *committer) place(p *placing) (order.Order, error) {
	k := shelf{p.row.QueueID, p.row.ProductID}
	p.done, p.arrived = make(chan struct{}), time.Now()
	c.mu.Lock()
	w, running := c.waiting[k]
	c.waiting[k] = append(w, p)
	if !running {
		go c.run(k)
	}
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.stored, p.err
	case <-p.ctx.Done():
	}
	c.mu.Lock()
	if !p.taken {
		c.waiting[k] = slices.DeleteFunc(c.waiting[k], func(q *placing) bool { return q == p })
		c.mu.Unlock()
		return order.Order{}, fmt.Errorf("%w (%w)", wrap(p.ctx, "place order", p.ctx.Err()), order.ErrNothingStored)
	}
	c.mu.Unlock()
	<-p.done
	return p.stored, p.err
}

// run commits k's batches until nobody waits; the key's presence in
// waiting says a run is on.
func (c *committer) run(k shelf) {
	for {
		c.mu.Lock()
		batch := c.take(k)
		if len(batch) == 0 {
			delete(c.waiting, k)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if f := c.d.opts.Batched; f != nil {
			f(len(batch), time.Since(batch[0].arrived))
		}
		c.d.commitBatch(batch)
		for _, p := range batch {
			close(p.done)
		}
	}
}

// take removes the next batch from k's waiting orders: the longest prefix
// of at most max orders without two of one person. The caller holds mu.
func (c *committer) take(k shelf) []*placing {
	w := c.waiting[k]
	n, users := 0, make(map[string]bool, min(len(w), c.max))
	for n < len(w) && n < c.max && !users[w[n].row.UserID] {
		users[w[n].row.UserID] = true
		w[n].taken = true
		n++
	}
	batch := slices.Clone(w[:n])
	c.waiting[k] = slices.Delete(w, 0, n)
	return batch
}

// errOneByOne ends a batch's transaction that failed for one order's sake.
var errOneByOne = errors.New("pg: place order: an order of the batch needs its own transaction")

// errNothingTaken ends a batch's transaction in which no order got stock:
// nothing to commit, every order has its answer.
var errNothingTaken = errors.New("pg: place order: no order of the batch took stock")

// commitBatch places batch's orders and sets each one's outcome. A batch of
// one is an order's own transaction.
func (d *DB) commitBatch(batch []*placing) {
	if len(batch) == 1 {
		p := batch[0]
		p.stored, p.err = d.placeOne(p.ctx, p)
		return
	}
	ctx, cancel := d.timeout(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	outcomes := make([]error, len(batch))
	stored := make([]order.Order, len(batch))
	err := d.conn(ctx).Transaction(func(tx *gorm.DB) error {
		return placeBatch(tx, batch, outcomes, stored)
	})
	switch {
	case err == nil, errors.Is(err, errNothingTaken):
		for i, p := range batch {
			p.stored, p.err = stored[i], outcomes[i]
		}
	case errors.Is(err, errOneByOne) || (nothingStored(err) && oneOrdersFault(err)):
		for _, p := range batch {
			p.stored, p.err = d.placeOne(p.ctx, p)
		}
	default:
		for _, p := range batch {
			p.err = wrap(p.ctx, "place order", err)
			if nothingStored(err) {
				p.err = fmt.Errorf("%w (%w)", p.err, order.ErrNothingStored)
			}
		}
	}
}

// oneOrdersFault reports whether a batch's transaction failed for one of its
// orders: a unique index (a used entry token or Idempotency-Key, an attempt
// recorded failed) or a deadlock with another replica's transaction over
// the people's counts. Each order then runs on its own.
func oneOrdersFault(err error) bool {
	code, _ := pgCode(err)
	return code == codeUniqueViolation || code == "40P01" || code == "40001"
}

// placeBatch is a batch's transaction: the people's counts read under
// their row locks (when a limit applies), the product's row locked, the
// stock handed out in arrival order, then one statement each for the
// stock, the counts, the orders, their events and their answers.
func placeBatch(tx *gorm.DB, batch []*placing, outcomes []error, stored []order.Order) error {
	q, product := batch[0].row.QueueID, batch[0].row.ProductID
	counts, err := lockCounts(tx, batch)
	if err != nil {
		return err
	}
	var (
		stock int
		now   time.Time
	)
	err = tx.Raw(`SELECT stock, now() FROM products WHERE id = ? AND queue_id = ? FOR UPDATE`, product, q).Row().Scan(&stock, &now)
	if errors.Is(err, sql.ErrNoRows) {
		for i := range batch {
			outcomes[i] = fmt.Errorf("pg: place order: %w: %s in queue %s", order.ErrProductNotFound, product, q)
		}
		return errNothingTaken
	}
	if err != nil {
		return err
	}
	var took []int
	total := 0
	for i, p := range batch {
		switch {
		case p.max > 0 && counts[p.row.UserID] >= p.max:
			outcomes[i] = fmt.Errorf("pg: place order: %w: %d in queue %s", order.ErrOrderLimitReached, p.max, q)
		case stock < p.row.Quantity:
			outcomes[i] = fmt.Errorf("pg: place order: %w: %s", order.ErrSoldOut, product)
		default:
			stock -= p.row.Quantity
			total += p.row.Quantity
			took = append(took, i)
		}
	}
	if len(took) == 0 {
		return errNothingTaken
	}
	if err := tx.Exec(`UPDATE products SET stock = stock - ?, updated_at = now() WHERE id = ? AND queue_id = ?`,
		total, product, q).Error; err != nil {
		return err
	}
	if err := addCounts(tx, batch, took, counts); err != nil {
		return err
	}
	events := make([]order.OutboxEvent, 0, len(took))
	orders := make([]orderRow, 0, len(took))
	for _, i := range took {
		p := batch[i]
		row := p.row
		row.CreatedAt = now
		stored[i] = row.order()
		e, err := Encode(p.event(stored[i]))
		if err != nil {
			return err
		}
		orders, events = append(orders, row), append(events, e)
	}
	if err := insertOrders(tx, orders); err != nil {
		return err
	}
	traces := make([]context.Context, len(took))
	for n, i := range took {
		traces[n] = batch[i].ctx
	}
	if err := insertEvents(tx, events, traces); err != nil {
		return err
	}
	return keepAnswers(tx, batch, took, stored)
}

// lockCounts reads, under their row locks, the counts of the batch's
// people in its queue when any order has a limit: the order of a person
// without a row yet counts 0, and addCounts catches another transaction
// adding that row meanwhile. The rows are locked in user id order, as
// every batch locks them.
func lockCounts(tx *gorm.DB, batch []*placing) (map[string]int64, error) {
	counts := make(map[string]int64, len(batch))
	if !slices.ContainsFunc(batch, func(p *placing) bool { return p.max > 0 }) {
		return counts, nil
	}
	users := make([]string, len(batch))
	for i, p := range batch {
		users[i] = p.row.UserID
	}
	return userCounts(tx.Raw(`SELECT user_id, orders FROM user_order_counts WHERE queue_id = ? AND user_id IN ?
		ORDER BY user_id FOR UPDATE`, batch[0].row.QueueID, users))
}

// userCounts reads the (user_id, orders) rows a statement returns.
func userCounts(stmt *gorm.DB) (map[string]int64, error) {
	rows, err := stmt.Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[string]int64{}
	for rows.Next() {
		var (
			u string
			n int64
		)
		if err := rows.Scan(&u, &n); err != nil {
			return nil, err
		}
		counts[u] = n
	}
	return counts, rows.Err()
}

// valueRows is n rows of a multi-row VALUES list, each row.
func valueRows(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// addCounts adds each order that took stock to its person's count. A count
// that is not the one read plus one was added to by another transaction
// between the read and now (its row did not exist yet): the batch runs
// again one order a transaction, where the limit is checked by the upsert.
func addCounts(tx *gorm.DB, batch []*placing, took []int, counts map[string]int64) error {
	byUser := slices.Clone(took)
	slices.SortFunc(byUser, func(a, b int) int { return strings.Compare(batch[a].row.UserID, batch[b].row.UserID) })
	args := make([]any, 0, 2*len(byUser))
	for _, i := range byUser {
		args = append(args, batch[i].row.QueueID, batch[i].row.UserID)
	}
	added, err := userCounts(tx.Raw(`INSERT INTO user_order_counts AS c (queue_id, user_id, orders) VALUES `+
		valueRows(len(byUser), "(?, ?, 1)")+`
		ON CONFLICT (queue_id, user_id) DO UPDATE SET orders = c.orders + 1
		RETURNING user_id, orders`, args...))
	if err != nil {
		return err
	}
	for _, i := range took {
		p := batch[i]
		if p.max > 0 && added[p.row.UserID] != counts[p.row.UserID]+1 {
			return errOneByOne
		}
	}
	return nil
}

// insertOrders inserts the orders with one statement.
func insertOrders(tx *gorm.DB, orders []orderRow) error {
	args := make([]any, 0, 10*len(orders))
	for _, o := range orders {
		args = append(args, o.ID, o.UserID, o.QueueID, o.ProductID, o.Quantity, o.EntryTokenID,
			o.IdempotencyKey, o.Status, o.Bypassed, o.CreatedAt)
	}
	// A used entry token or key fails the statement: which order's it is,
	// the orders on their own find out.
	return tx.Exec(`INSERT INTO orders (id, user_id, queue_id, product_id, quantity, entry_token_id,
		idempotency_key, status, bypassed, created_at) VALUES `+valueRows(len(orders), "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"), args...).Error
}

// keepAnswers stores the answers of the orders with an Idempotency-Key
// that took stock, with one statement.
func keepAnswers(tx *gorm.DB, batch []*placing, took []int, stored []order.Order) error {
	var args []any
	for _, i := range took {
		if p := batch[i]; p.key != "" {
			a := p.answer(stored[i])
			args = append(args, p.row.UserID, p.key, a.Status, payload(a.Body))
		}
	}
	if len(args) == 0 {
		return nil
	}
	return tx.Exec(`INSERT INTO idempotency (user_id, key, status, body, created_at) VALUES `+valueRows(len(args)/4, "(?, ?, ?, ?, now())")+`
		ON CONFLICT (user_id, key) DO UPDATE SET status = excluded.status, body = excluded.body`, args...).Error
}
