package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// batches records the shared transactions' sizes.
type batches struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batches) observe(n int, _ time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, n)
}

func (b *batches) all() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

// queued places the placements behind a held product, one at a time in
// their order, then releases them as one batch; it returns each one's
// stored order and error.
func queued(t *testing.T, db *pg.DB, q, product string, ps []order.Placement) ([]order.Order, []error) {
	t.Helper()
	release := pg.HoldBatches(db, q, product)
	stored, errs := make([]order.Order, len(ps)), make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() { stored[i], errs[i] = db.PlaceOrder(context.Background(), p) })
		deadline := time.Now().Add(10 * time.Second)
		for pg.Waiting(db, q, product) != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("order %d did not join the line: %d waiting", i, pg.Waiting(db, q, product))
			}
			time.Sleep(time.Millisecond)
		}
	}
	release()
	wg.Wait()
	return stored, errs
}

// Concurrent orders of one product share transactions: every order is
// stored with its event, the stock goes down by exactly their number, and
// fewer transactions than orders ran.
func TestGroupCommitSharesTransactions(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresURL(t)
	var b batches
	o := testOptions(t)
	o.Batched = b.observe
	db, raw := open(t, dsn, o), rawDB(t, dsn)
	p := mustUpsert(t, db, product("hot", "q1", 1000))

	ps := make([]order.Placement, 40)
	for i := range ps {
		ps[i] = order.Placement{Order: newOrder(p, i, 1), Event: createdEvent}
	}
	stored, errs := queued(t, db, "q1", "hot", ps)
	for i, err := range errs {
		if err != nil || stored[i].EntryTokenID != fmt.Sprintf("token-%d", i) || stored[i].CreatedAt.IsZero() {
			t.Errorf("order %d: %+v %v", i, stored[i], err)
		}
	}
	if got := b.all(); len(got) != 1 || got[0] != 40 {
		t.Fatalf("batches %v, want one of 40", got)
	}
	// One transaction: one clock for all.
	for i := range stored {
		if !stored[i].CreatedAt.Equal(stored[0].CreatedAt) {
			t.Fatalf("order %d created at %v, order 0 at %v: not one transaction", i, stored[i].CreatedAt, stored[0].CreatedAt)
		}
	}
	if s, n, e := count(t, raw, `SELECT stock FROM products WHERE id = 'hot'`), count(t, raw, `SELECT count(*) FROM orders`),
		count(t, raw, `SELECT count(*) FROM outbox WHERE type = 'waitingroom.v1.OrderCreated'`); s != 960 || n != 40 || e != 40 {
		t.Fatalf("stock %d, %d orders, %d OrderCreated; want 960, 40, 40", s, n, e)
	}

	// Unheld, 100 concurrent orders: all stored, in fewer transactions.
	var wg sync.WaitGroup
	errs = make([]error, 100)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = db.PlaceOrder(context.Background(), order.Placement{Order: newOrder(p, 1000+i, 1), Event: createdEvent})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("order %d: %v", 1000+i, err)
		}
	}
	sizes, sum := b.all()[1:], 0
	for _, n := range sizes {
		if n < 1 || n > 64 {
			t.Errorf("a batch of %d", n)
		}
		sum += n
	}
	if sum != 100 {
		t.Fatalf("batches %v hold %d orders, want 100", sizes, sum)
	}
	if s := count(t, raw, `SELECT stock FROM products WHERE id = 'hot'`); s != 860 {
		t.Fatalf("stock %d, want 860", s)
	}
	t.Logf("100 orders in %d transactions: %v", len(sizes), sizes)
}

// Stock runs out in the middle of a batch: it goes to the orders in their
// arrival order, each that fits takes it, and the rest are sold out.
func TestGroupCommitHandsOutStockInArrivalOrder(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	p := mustUpsert(t, db, product("hot", "q1", 5))
	qty := []int{3, 3, 2, 1}
	ps := make([]order.Placement, len(qty))
	for i, n := range qty {
		ps[i] = order.Placement{Order: newOrder(p, i, n), Event: createdEvent}
	}
	_, errs := queued(t, db, "q1", "hot", ps)
	want := []bool{true, false, true, false} // 5-3=2; 3 > 2; 2-2=0; 1 > 0
	for i, err := range errs {
		if ok := err == nil; ok != want[i] || (!ok && !errors.Is(err, order.ErrSoldOut)) {
			t.Errorf("order %d of %d: %v, want stored %v or sold out", i, qty[i], err, want[i])
		}
		if errors.Is(err, order.ErrNothingStored) {
			t.Errorf("order %d: a refusal of the database, not a failure: %v", i, err)
		}
	}
	if s, n, e := count(t, raw, `SELECT stock FROM products WHERE id = 'hot'`), count(t, raw, `SELECT count(*) FROM orders`),
		count(t, raw, `SELECT count(*) FROM outbox`); s != 0 || n != 2 || e != 2 {
		t.Fatalf("stock %d, %d orders, %d events; want 0, 2, 2", s, n, e)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders WHERE entry_token_id IN ('token-0', 'token-2')`); n != 2 {
		t.Fatalf("%d of orders 0 and 2 stored, want 2", n)
	}
}

// The per-person limit holds in a batch: a person at the limit is refused
// and takes nothing, others are not held up, and a second order of one
// person waits for the next batch, where the limit sees the first.
func TestGroupCommitKeepsThePersonsLimit(t *testing.T) {
	t.Parallel()
	var b batches
	dsn := testenv.PostgresURL(t)
	o := testOptions(t)
	o.Batched = b.observe
	db, raw := open(t, dsn, o), rawDB(t, dsn)
	p := mustUpsert(t, db, product("hot", "q1", 100))
	if _, err := db.PlaceOrder(context.Background(), order.Placement{Order: newOrder(p, 0, 1), MaxOrders: 1, Event: createdEvent}); err != nil {
		t.Fatal(err)
	}
	at := func(user, token int) order.Placement {
		o := newOrder(p, user, 1)
		o.EntryTokenID = fmt.Sprintf("token-%d-%d", user, token)
		return order.Placement{Order: o, MaxOrders: 1, Event: createdEvent}
	}
	// user-0 has 1 already; user-1 twice (the second waits a batch);
	// user-2 once.
	_, errs := queued(t, db, "q1", "hot", []order.Placement{at(0, 1), at(1, 1), at(2, 1), at(1, 2)})
	for i, want := range []error{order.ErrOrderLimitReached, nil, nil, order.ErrOrderLimitReached} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("order %d: %v, want %v", i, errs[i], want)
		}
	}
	if got := b.all(); len(got) != 3 || got[1] != 3 || got[2] != 1 {
		t.Errorf("batches %v, want [1 3 1]: the lone first order, then a person's second in a batch of its own", got)
	}
	for user, want := range map[string]int{"user-0": 1, "user-1": 1, "user-2": 1} {
		if n := count(t, raw, `SELECT orders FROM user_order_counts WHERE queue_id = 'q1' AND user_id = $1`, user); n != want {
			t.Errorf("%s counts %d orders, want %d", user, n, want)
		}
		if n := count(t, raw, `SELECT count(*) FROM orders WHERE user_id = $1`, user); n != want {
			t.Errorf("%s has %d orders, want %d", user, n, want)
		}
	}
	if s := count(t, raw, `SELECT stock FROM products WHERE id = 'hot'`); s != 97 {
		t.Fatalf("stock %d, want 97", s)
	}
}

// An order of a batch whose entry token is used, or whose attempt was
// recorded failed, fails the shared transaction: the batch runs again one
// order a transaction, so that order gets its own refusal and the others
// are stored.
func TestGroupCommitGivesOneOrdersFaultToThatOrder(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	p := mustUpsert(t, db, product("hot", "q1", 10))
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 0, 1), Event: createdEvent}); err != nil {
		t.Fatal(err)
	}
	reaped := newOrder(p, 3, 1)
	reaped.ID = "order-reaped"
	if added, err := db.AddEvent(ctx, order.Failed{QueueID: "q1", UserID: reaped.UserID, TokenID: reaped.EntryTokenID, OrderID: reaped.ID,
		Reason: order.ReasonAbandoned, Restorable: true, RemainingTTL: time.Minute, At: time.Now()}); err != nil || !added {
		t.Fatalf("AddEvent: %v %v", added, err)
	}
	used := newOrder(p, 1, 1)
	used.EntryTokenID = "token-0" // stored above
	_, errs := queued(t, db, "q1", "hot", []order.Placement{
		{Order: used, Event: createdEvent},
		{Order: newOrder(p, 2, 1), Event: createdEvent},
		{Order: reaped, Event: createdEvent},
		{Order: newOrder(p, 4, 1), Event: createdEvent},
	})
	for i, want := range []error{order.ErrDuplicateToken, nil, order.ErrAttemptFailed, nil} {
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("order %d: %v, want %v", i, errs[i], want)
		}
	}
	if s, n := count(t, raw, `SELECT stock FROM products WHERE id = 'hot'`), count(t, raw, `SELECT count(*) FROM orders`); s != 7 || n != 3 {
		t.Fatalf("stock %d, %d orders; want 7 and 3", s, n)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders WHERE user_id IN ('user-1', 'user-3')`); n != 0 {
		t.Fatalf("%d orders of the refused, want 0", n)
	}
}

// Orders with an Idempotency-Key keep their answer in their commit; a
// refused one keeps none there (the service stores its refusal).
func TestGroupCommitKeepsTheAnswersInTheCommit(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	p := mustUpsert(t, db, product("hot", "q1", 2))
	answer := func(o order.Order) order.StoredAnswer {
		return order.StoredAnswer{Status: 201, Body: []byte(`{"orderId":"` + o.ID + `"}`)}
	}
	ps := make([]order.Placement, 3)
	for i := range ps {
		ps[i] = order.Placement{Order: newOrder(p, i, 1), Event: createdEvent, Key: fmt.Sprintf("key-%d", i), Answer: answer}
	}
	stored, errs := queued(t, db, "q1", "hot", ps)
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("order %d: %v", i, errs[i])
		}
		got, found, err := db.LookupIdempotent(context.Background(), fmt.Sprintf("user-%d", i), fmt.Sprintf("key-%d", i))
		if err != nil || !found || !got.Done || got.Status != 201 || string(got.Body) != `{"orderId":"`+stored[i].ID+`"}` {
			t.Fatalf("answer of order %d: %+v %v %v", i, got, found, err)
		}
	}
	if !errors.Is(errs[2], order.ErrSoldOut) {
		t.Fatalf("order 2: %v, want sold out", errs[2])
	}
	if n := count(t, raw, `SELECT count(*) FROM idempotency`); n != 2 {
		t.Fatalf("%d answers kept, want 2", n)
	}
}

// A caller that gives up while its order waits for a batch leaves with
// nothing stored, and its order is not placed; the others are.
func TestGroupCommitLetsAWaitingCallerLeave(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	p := mustUpsert(t, db, product("hot", "q1", 10))
	release := pg.HoldBatches(db, "q1", "hot")
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 0, 1), Event: createdEvent})
		left <- err
	}()
	stayed := make(chan error, 1)
	go func() {
		_, err := db.PlaceOrder(context.Background(), order.Placement{Order: newOrder(p, 1, 1), Event: createdEvent})
		stayed <- err
	}()
	for pg.Waiting(db, "q1", "hot") != 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) || !errors.Is(err, order.ErrNothingStored) {
		t.Fatalf("the caller who left: %v, want canceled and nothing stored", err)
	}
	if n := pg.Waiting(db, "q1", "hot"); n != 1 {
		t.Fatalf("%d waiting after one left, want 1", n)
	}
	release()
	if err := <-stayed; err != nil {
		t.Fatalf("the caller who stayed: %v", err)
	}
	if n, s := count(t, raw, `SELECT count(*) FROM orders`), count(t, raw, `SELECT stock FROM products WHERE id = 'hot'`); n != 1 || s != 9 {
		t.Fatalf("%d orders, stock %d; want 1 and 9", n, s)
	}
}
