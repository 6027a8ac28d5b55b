package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

func TestPlaceOrderNeverOversells(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	p := mustUpsert(t, db, product("hot", "q1", 10))

	const buyers = 100
	errs := make([]error, buyers)
	placed := make([]order.Order, buyers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buyers {
		wg.Go(func() {
			<-start
			placed[i], errs[i] = db.PlaceOrder(context.Background(), order.Placement{Order: newOrder(p, i, 1), Event: createdEvent})
		})
	}
	close(start)
	wg.Wait()

	var ok, soldOut int
	tokens := map[string]bool{}
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
			o := placed[i]
			if o.ID == "" || o.Status != order.StatusCreated || o.CreatedAt.IsZero() || o.EntryTokenID != fmt.Sprintf("token-%d", i) {
				t.Errorf("buyer %d: stored order %+v", i, o)
			}
			tokens[o.EntryTokenID] = true
		case errors.Is(err, order.ErrSoldOut):
			soldOut++
		default:
			t.Errorf("buyer %d: %v, want nil or ErrSoldOut", i, err)
		}
	}
	if ok != 10 || soldOut != 90 || len(tokens) != 10 {
		t.Fatalf("%d orders (%d tokens), %d sold out; want 10, 90", ok, len(tokens), soldOut)
	}
	if got, err := db.Product(context.Background(), "hot"); err != nil || got.Stock != 0 {
		t.Fatalf("stock %d, %v; want 0", got.Stock, err)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders WHERE product_id = 'hot'`); n != 10 {
		t.Fatalf("%d order rows, want 10", n)
	}
	// One OrderCreated per order, each naming its own order.
	if n := count(t, raw, `SELECT count(*) FROM outbox o JOIN orders r ON o.event_id = r.id || '.created'`); n != 10 {
		t.Fatalf("%d outbox rows matching orders, want 10", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 10 {
		t.Fatalf("%d outbox rows, want 10", n)
	}
}

func TestPlaceOrderDuplicateToken(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	p := mustUpsert(t, db, product("p", "q1", 5))

	first, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 1, 1), Event: createdEvent})
	if err != nil {
		t.Fatalf("first order: %v", err)
	}
	again := newOrder(p, 1, 2) // same token, another quantity
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: again, Event: createdEvent}); !errors.Is(err, order.ErrDuplicateToken) {
		t.Fatalf("second order with the same token: %v, want ErrDuplicateToken", err)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
	if got, _ := db.Product(ctx, "p"); got.Stock != 4 {
		t.Fatalf("stock %d, want 4: the duplicate's decrement must roll back", got.Stock)
	}

	byID, err := db.Order(ctx, first.ID)
	if err != nil || byID != first {
		t.Fatalf("Order = %+v, %v; want %+v", byID, err, first)
	}
	byToken, found, err := db.OrderByToken(ctx, "token-1")
	if err != nil || !found || byToken != first {
		t.Fatalf("OrderByToken = %+v, %v, %v; want %+v", byToken, found, err, first)
	}
	if _, err := db.Order(ctx, "nope"); !errors.Is(err, order.ErrOrderNotFound) {
		t.Fatalf("Order(nope) = %v, want ErrOrderNotFound", err)
	}
	if _, found, err := db.OrderByToken(ctx, "nope"); found || err != nil {
		t.Fatalf("OrderByToken(nope) = %v, %v; want not found", found, err)
	}
}

func TestPlaceOrderStoresWhatItReturns(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	p := mustUpsert(t, db, product("p", "q1", 5))
	o := newOrder(p, 1, 2)
	o.ID, o.IdempotencyKey = "order-1", "key-1"
	before := time.Now().Add(-time.Minute)
	var seen order.Order
	got, err := db.PlaceOrder(ctx, order.Placement{Order: o, Event: func(s order.Order) order.Event {
		seen = s
		return createdEvent(s)
	}})

	if err != nil {
		t.Fatalf("PlaceOrder: %v", err)
	}
	o.Status, o.CreatedAt = order.StatusCreated, got.CreatedAt
	if got != o || seen != got || got.CreatedAt.Before(before) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("returned %+v, event built from %+v; want %+v with the database's time in UTC", got, seen, o)
	}
	if stored, err := db.Order(ctx, "order-1"); err != nil || stored != got {
		t.Fatalf("Order = %+v, %v; want %+v", stored, err, got)
	}
	var payload []byte
	if err := raw.QueryRow(`SELECT payload FROM outbox WHERE event_id = 'order-1.created'`).Scan(&payload); err != nil {
		t.Fatalf("outbox row of order-1.created: %v", err)
	}
	var created waitingroomv1.OrderCreated
	if err := proto.Unmarshal(payload, &created); err != nil || created.GetOrderId() != "order-1" || created.GetTokenId() != "token-1" ||
		created.GetQuantity() != 2 || !created.GetOccurredAt().AsTime().Equal(got.CreatedAt) {
		t.Fatalf("outbox payload %v, %v; want order-1, token-1, 2 at %s", &created, err, got.CreatedAt)
	}

	// The same user and Idempotency-Key cannot make a second order.
	o2 := newOrder(p, 1, 1)
	o2.EntryTokenID, o2.IdempotencyKey = "token-other", "key-1"
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: o2, Event: createdEvent}); !errors.Is(err, order.ErrIdempotencyInProgress) {
		t.Fatalf("second order with the same idempotency key: %v, want ErrIdempotencyInProgress", err)
	}
	// An event that cannot be encoded rolls the order back.
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 3, 1), Event: func(order.Order) order.Event { return nil }}); err == nil {
		t.Fatal("PlaceOrder with no event to record succeeded")
	}
	if got, _ := db.Product(ctx, "p"); got.Stock != 3 {
		t.Fatalf("stock %d, want 3", got.Stock)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}

	// A bypassed order is stored, read back and announced as one.
	b := newOrder(p, 1, 1)
	b.ID, b.EntryTokenID, b.Bypassed = "order-2", "bypass-order-2", true
	got, err = db.PlaceOrder(ctx, order.Placement{Order: b, Event: createdEvent})
	if err != nil || !got.Bypassed {
		t.Fatalf("bypassed PlaceOrder = %+v, %v; want a bypassed order", got, err)
	}
	if stored, err := db.Order(ctx, "order-2"); err != nil || stored != got {
		t.Fatalf("Order(order-2) = %+v, %v; want %+v", stored, err, got)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders WHERE bypassed`); n != 1 {
		t.Fatalf("%d bypassed orders, want 1", n)
	}
	if err := raw.QueryRow(`SELECT payload FROM outbox WHERE event_id = 'order-2.created'`).Scan(&payload); err != nil {
		t.Fatalf("outbox row of order-2.created: %v", err)
	}
	if err := proto.Unmarshal(payload, &created); err != nil || !created.GetBypassed() || created.GetTokenId() != "bypass-order-2" {
		t.Fatalf("outbox payload %v, %v; want bypassed with token bypass-order-2", &created, err)
	}
}

func TestPlaceOrderUnknownProduct(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	p := mustUpsert(t, db, product("p", "q1", 5))
	mustUpsert(t, db, product("other", "q2", 5))

	calls := 0
	event := func(o order.Order) order.Event { calls++; return createdEvent(o) }
	missing := newOrder(p, 1, 1)
	missing.ProductID = "nope"
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: missing, Event: event}); !errors.Is(err, order.ErrProductNotFound) {
		t.Fatalf("unknown product: %v, want ErrProductNotFound", err)
	}
	foreign := newOrder(p, 2, 1)
	foreign.ProductID = "other" // exists, but in q2
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: foreign, Event: event}); !errors.Is(err, order.ErrProductNotFound) {
		t.Fatalf("product of another queue: %v, want ErrProductNotFound", err)
	}
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 3, 6), Event: event}); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("quantity above stock: %v, want ErrSoldOut", err)
	}
	if _, err := db.PlaceOrder(ctx, order.Placement{Order: newOrder(p, 4, 0), Event: event}); err == nil {
		t.Fatal("quantity 0 accepted")
	}
	for _, id := range []string{"p", "other"} {
		if got, _ := db.Product(ctx, id); got.Stock != 5 {
			t.Fatalf("stock of %s %d, want 5", id, got.Stock)
		}
	}
	if n := count(t, raw, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders, want 0", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 0 {
		t.Fatalf("%d outbox rows, want 0", n)
	}
	if calls != 0 {
		t.Fatalf("event builder called %d times, want 0", calls)
	}
}
