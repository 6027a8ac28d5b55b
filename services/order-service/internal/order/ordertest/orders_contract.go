package ordertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// RunOrdersContract states what the order path relies on from order.Orders:
// an order takes its product's stock or fails whole (sold out, no such
// product, its entry token or Idempotency-Key used), its event is stored
// with it, and the outbox keeps one event per id and one per attempt.
func RunOrdersContract(t *testing.T, newRepo NewRepoFunc) {
	runRepoCases(t, newRepo, []repoCase{
		{"PlaceOrderTakesStockAndStoresOrderAndEvent", placeTakesStock},
		{"SoldOutWhenTheStockIsShort", soldOut},
		{"ProductMustBeInTheQueue", productNotFound},
		{"AnEntryTokenOrdersOnce", duplicateToken},
		{"AnIdempotencyKeyOrdersOncePerUser", duplicateKey},
		{"AKeyedOrderKeepsItsAnswerInItsCommit", keptAnswer},
		{"QuantityBelowOneIsRefused", quantityBelowOne},
		{"AddEventKeepsOneEventPerID", addEventOnce},
		{"AnAttemptHasOneResolution", oneResolution},
		{"UnknownOrdersAreNotFound", unknownOrders},
		{"ConcurrentOrdersNeverOversell", concurrentOrders},
		{"OrderLimitCountsThePersonsOrdersInTheQueue", orderLimit},
		{"ConcurrentOrdersOfOnePersonPassTheLimitOnce", concurrentOrderLimit},
	})
}

func stockOf(t *testing.T, r order.Repo, q, id string) int {
	t.Helper()
	ps, err := r.Products(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.ID == id {
			return p.Stock
		}
	}
	t.Fatalf("product %s is not listed in %s: %+v", id, q, ps)
	return 0
}

func created(o order.Order) order.Event { return order.Created{Order: o} }

// attempt is an order of qty of product in queue q by user with token.
func attempt(q, product, user, token string, qty int) order.Order {
	return order.Order{QueueID: q, ProductID: product, UserID: user, EntryTokenID: token, Quantity: qty, Status: order.StatusCreated}
}

// sameOrder compares orders, their times by instant.
func sameOrder(a, b order.Order) bool {
	ta, tb := a.CreatedAt, b.CreatedAt
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

// nothingStoredFor checks that no order and no OrderCreated exist for a
// failed attempt with id.
func nothingStoredFor(t *testing.T, r order.Repo, id, token string) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.Order(ctx, id); !errors.Is(err, order.ErrOrderNotFound) {
		t.Fatalf("order %s after a failed attempt: %v, want ErrOrderNotFound", id, err)
	}
	if o, found, err := r.OrderByToken(ctx, token); err != nil || found {
		t.Fatalf("order by token %s after a failed attempt: %+v %v %v, want none", token, o, found, err)
	}
	// The outbox takes the event id: nothing was written under it.
	if added, err := r.AddEvent(ctx, created(order.Order{ID: id, QueueID: "sale", UserID: "u", ProductID: "p", EntryTokenID: token, Quantity: 1})); err != nil || !added {
		t.Fatalf("add the attempt's OrderCreated: %v %v, want added (none was stored)", added, err)
	}
}

func placeTakesStock(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	for _, tc := range []struct {
		name, id string
		qty      int
		left     int
	}{
		{"with the order's id", "order-given", 2, 3},
		{"without an id: one is made", "", 3, 0},
	} {
		o := attempt("sale", "sku-1", "alice", "tok-"+tc.name, tc.qty)
		o.ID = tc.id
		var built []order.Order
		before := time.Now().Add(-time.Second)
		stored, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: func(s order.Order) order.Event {
			built = append(built, s)
			return created(s)
		}})
		after := time.Now().Add(time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := o
		want.ID, want.CreatedAt = stored.ID, stored.CreatedAt
		if stored != want || stored.ID == "" || (tc.id != "" && stored.ID != tc.id) ||
			stored.CreatedAt.Before(before) || stored.CreatedAt.After(after) {
			t.Fatalf("%s: stored %+v, want %+v with an id and a creation time of now", tc.name, stored, o)
		}
		if len(built) != 1 || !sameOrder(built[0], stored) {
			t.Fatalf("%s: the event was built from %+v, want once from the stored %+v", tc.name, built, stored)
		}
		if left := stockOf(t, r, "sale", "sku-1"); left != tc.left {
			t.Fatalf("%s: stock %d, want %d", tc.name, left, tc.left)
		}
		if got, err := r.Order(ctx, stored.ID); err != nil || !sameOrder(got, stored) {
			t.Fatalf("%s: Order = %+v %v, want %+v", tc.name, got, err, stored)
		}
		if got, found, err := r.OrderByToken(ctx, o.EntryTokenID); err != nil || !found || !sameOrder(got, stored) {
			t.Fatalf("%s: OrderByToken = %+v %v %v, want %+v", tc.name, got, found, err, stored)
		}
		// The event went in with the order: its id is taken.
		if added, err := r.AddEvent(ctx, created(stored)); err != nil || added {
			t.Fatalf("%s: add the order's OrderCreated again: %v %v, want not added", tc.name, added, err)
		}
	}
}

func soldOut(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 1)
	for i, tc := range []struct {
		qty     int
		soldOut bool
		left    int
	}{
		{2, true, 1},  // more than there is
		{1, false, 0}, // the last one
		{1, true, 0},  // none left
	} {
		o := attempt("sale", "sku-1", "alice", fmt.Sprintf("tok-%d", i), tc.qty)
		o.ID = fmt.Sprintf("order-%d", i)
		_, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: created})
		if errors.Is(err, order.ErrSoldOut) != tc.soldOut || (!tc.soldOut && err != nil) {
			t.Fatalf("order %d of %d: %v, want sold out %v", i, tc.qty, err, tc.soldOut)
		}
		if left := stockOf(t, r, "sale", "sku-1"); left != tc.left {
			t.Fatalf("after order %d: stock %d, want %d", i, left, tc.left)
		}
		if tc.soldOut {
			nothingStoredFor(t, r, o.ID, o.EntryTokenID)
		}
	}
}

func productNotFound(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	for i, o := range []order.Order{
		attempt("other", "sku-1", "alice", "tok-0", 1), // its id, another queue
		attempt("sale", "sku-2", "alice", "tok-1", 1),  // no such product
	} {
		o.ID = fmt.Sprintf("order-%d", i)
		if _, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: created}); !errors.Is(err, order.ErrProductNotFound) {
			t.Fatalf("order %s of %s in %s: %v, want ErrProductNotFound", o.ID, o.ProductID, o.QueueID, err)
		}
		nothingStoredFor(t, r, o.ID, o.EntryTokenID)
	}
	if left := stockOf(t, r, "sale", "sku-1"); left != 5 {
		t.Fatalf("stock %d, want 5", left)
	}
}

func duplicateToken(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	first, err := r.PlaceOrder(ctx, order.Placement{Order: attempt("sale", "sku-1", "alice", "tok-1", 1), Event: created})
	if err != nil {
		t.Fatal(err)
	}
	again := attempt("sale", "sku-1", "bob", "tok-1", 1)
	again.ID = "order-again"
	if _, err := r.PlaceOrder(ctx, order.Placement{Order: again, Event: created}); !errors.Is(err, order.ErrDuplicateToken) {
		t.Fatalf("second order with the token: %v, want ErrDuplicateToken", err)
	}
	if left := stockOf(t, r, "sale", "sku-1"); left != 4 {
		t.Fatalf("stock %d, want 4 (one order)", left)
	}
	if _, err := r.Order(ctx, again.ID); !errors.Is(err, order.ErrOrderNotFound) {
		t.Fatalf("the refused order: %v, want ErrOrderNotFound", err)
	}
	if got, found, err := r.OrderByToken(ctx, "tok-1"); err != nil || !found || got.ID != first.ID {
		t.Fatalf("order by token: %+v %v %v, want the first", got, found, err)
	}
}

func duplicateKey(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	for i, tc := range []struct {
		user     string
		refused  bool
		stockNow int
	}{
		{"alice", false, 4},
		{"alice", true, 4}, // her key again, another token
		{"bob", false, 3},  // the same key is bob's own
	} {
		o := attempt("sale", "sku-1", tc.user, fmt.Sprintf("tok-%d", i), 1)
		o.ID, o.IdempotencyKey = fmt.Sprintf("order-%d", i), "key-1"
		_, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: created})
		if errors.Is(err, order.ErrIdempotencyInProgress) != tc.refused || (!tc.refused && err != nil) {
			t.Fatalf("order %d by %s: %v, want refused %v", i, tc.user, err, tc.refused)
		}
		if left := stockOf(t, r, "sale", "sku-1"); left != tc.stockNow {
			t.Fatalf("after order %d: stock %d, want %d", i, left, tc.stockNow)
		}
	}
}

// keptAnswer: an order placed with a Key stores the answer Answer builds
// from the stored order; a refused one stores nothing under its key.
func keptAnswer(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 1)
	answer := func(o order.Order) order.StoredAnswer {
		return order.StoredAnswer{Status: 201, Body: []byte(o.ID + "|" + o.EntryTokenID)}
	}
	o := attempt("sale", "sku-1", "alice", "tok-1", 1)
	o.ID = "order-1"
	stored, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: created, Key: "key-1", Answer: answer})
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := r.LookupIdempotent(ctx, "alice", "key-1")
	if err != nil || !found || !got.Done || got.Status != 201 || string(got.Body) != stored.ID+"|tok-1" {
		t.Fatalf("alice|key-1 after her order: %+v found %v %v; want Done 201 %q", got, found, err, stored.ID+"|tok-1")
	}
	o = attempt("sale", "sku-1", "bob", "tok-2", 1)
	o.ID = "order-2"
	if _, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: created, Key: "key-2", Answer: answer}); !errors.Is(err, order.ErrSoldOut) {
		t.Fatalf("bob's order: %v, want sold out", err)
	}
	if _, found, err := r.LookupIdempotent(ctx, "bob", "key-2"); err != nil || found {
		t.Fatalf("bob|key-2 after a refusal: found %v %v; want nothing kept", found, err)
	}
}

func quantityBelowOne(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	for _, qty := range []int{0, -3} {
		o := attempt("sale", "sku-1", "alice", fmt.Sprintf("tok-%d", qty), qty)
		o.ID = fmt.Sprintf("order-%d", -qty)
		if _, err := r.PlaceOrder(ctx, order.Placement{Order: o, Event: created}); err == nil {
			t.Fatalf("quantity %d placed", qty)
		}
		nothingStoredFor(t, r, o.ID, o.EntryTokenID)
	}
	if left := stockOf(t, r, "sale", "sku-1"); left != 5 {
		t.Fatalf("stock %d, want 5", left)
	}
}

func addEventOnce(t *testing.T, r order.Repo) {
	ctx := context.Background()
	at := time.Now().UTC()
	failed := order.Failed{QueueID: "sale", UserID: "alice", TokenID: "tok-1", OrderID: "order-1",
		Reason: order.ReasonAbandoned, Restorable: true, RemainingTTL: time.Minute, At: at}
	other := failed
	other.OrderID = "order-2"
	for _, step := range []struct {
		name string
		e    order.Event
		want bool
	}{
		{"an event", failed, true},
		{"the same event again", failed, false},
		{"the same id, told differently", order.Failed{QueueID: "sale", UserID: "alice", TokenID: "tok-1", OrderID: "order-1", Reason: order.ReasonTimeout, At: at}, false},
		{"another attempt's event", other, true},
	} {
		added, err := r.AddEvent(ctx, step.e)
		if err != nil || added != step.want {
			t.Fatalf("%s: added %v %v, want %v", step.name, added, err, step.want)
		}
	}
}

// oneResolution: an order attempt (its order id) is resolved once. An
// OrderFailed for an attempt whose order committed is refused with
// ErrOrderPlaced (the commit's answer was lost: the token must not come
// back); an order whose attempt was recorded failed first does not commit
// (ErrAttemptFailed), and leaves the stock as it was.
func oneResolution(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	failedFor := func(o order.Order) order.Failed {
		return order.Failed{QueueID: o.QueueID, UserID: o.UserID, TokenID: o.EntryTokenID, OrderID: o.ID,
			Reason: order.ReasonTimeout, Restorable: true, RemainingTTL: time.Minute, At: time.Now().UTC()}
	}

	placed := attempt("sale", "sku-1", "alice", "tok-1", 1)
	placed.ID = "order-1"
	if _, err := r.PlaceOrder(ctx, order.Placement{Order: placed, Event: created}); err != nil {
		t.Fatal(err)
	}
	if added, err := r.AddEvent(ctx, failedFor(placed)); !errors.Is(err, order.ErrOrderPlaced) || added {
		t.Fatalf("OrderFailed for a committed attempt: added %v, %v; want ErrOrderPlaced", added, err)
	}

	late := attempt("sale", "sku-1", "bob", "tok-2", 1)
	late.ID = "order-2"
	if added, err := r.AddEvent(ctx, failedFor(late)); err != nil || !added {
		t.Fatalf("OrderFailed first: added %v, %v", added, err)
	}
	if o, err := r.PlaceOrder(ctx, order.Placement{Order: late, Event: created}); !errors.Is(err, order.ErrAttemptFailed) || o.ID != "" {
		t.Fatalf("order of an attempt recorded failed: %+v, %v; want ErrAttemptFailed", o, err)
	}
	if _, err := r.Order(ctx, "order-2"); !errors.Is(err, order.ErrOrderNotFound) {
		t.Fatalf("order-2 after its refused commit: %v, want ErrOrderNotFound", err)
	}
	if n := stockOf(t, r, "sale", "sku-1"); n != 4 {
		t.Fatalf("stock %d, want 4 (one order)", n)
	}
	// The token of the refused attempt orders under a new attempt (its
	// restore gave it back).
	again := late
	again.ID = "order-3"
	if _, err := r.PlaceOrder(ctx, order.Placement{Order: again, Event: created}); err != nil {
		t.Fatalf("the restored token's next attempt: %v", err)
	}
	if n := stockOf(t, r, "sale", "sku-1"); n != 3 {
		t.Fatalf("stock %d, want 3 (two orders)", n)
	}
}

func unknownOrders(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if o, err := r.Order(ctx, "order-none"); !errors.Is(err, order.ErrOrderNotFound) || o != (order.Order{}) {
		t.Fatalf("Order of an unknown id: %+v %v, want ErrOrderNotFound", o, err)
	}
	if o, found, err := r.OrderByToken(ctx, "tok-none"); err != nil || found || o != (order.Order{}) {
		t.Fatalf("OrderByToken of an unknown token: %+v %v %v, want none", o, found, err)
	}
}

func concurrentOrders(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 5)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = r.PlaceOrder(ctx, order.Placement{Order: attempt("sale", "sku-1", fmt.Sprintf("user-%d", i), fmt.Sprintf("tok-%d", i), 1), Event: created})
		})
	}
	wg.Wait()
	placed, sold := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			placed++
		case errors.Is(err, order.ErrSoldOut):
			sold++
		default:
			t.Errorf("order %d: %v", i, err)
		}
	}
	if placed != 5 || sold != n-5 || stockOf(t, r, "sale", "sku-1") != 0 {
		t.Fatalf("%d placed, %d sold out, stock %d; want 5, %d, 0", placed, sold, stockOf(t, r, "sale", "sku-1"), n-5)
	}
}

// orderLimit: maxOrders counts every order the person has in the queue
// (placed with a limit or without), not other people's, not other queues',
// not attempts that failed; the refused attempt takes no stock and stores
// nothing.
func orderLimit(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 10)
	put(t, r, "sku-2", "other", 10)
	put(t, r, "sku-empty", "sale", 0)
	steps := []struct {
		name      string
		o         order.Order
		maxOrders int64
		want      error
	}{
		{"first of two allowed", attempt("sale", "sku-1", "alice", "tok-1", 1), 2, nil},
		{"sold out does not count", attempt("sale", "sku-empty", "alice", "tok-2", 1), 2, order.ErrSoldOut},
		{"second of two allowed", attempt("sale", "sku-1", "alice", "tok-3", 3), 2, nil},
		{"third refused", attempt("sale", "sku-1", "alice", "tok-4", 1), 2, order.ErrOrderLimitReached},
		{"raised limit lets one more", attempt("sale", "sku-1", "alice", "tok-5", 1), 3, nil},
		{"another person is not counted with her", attempt("sale", "sku-1", "bob", "tok-6", 1), 1, nil},
		{"another queue is not counted with this one", attempt("other", "sku-2", "alice", "tok-7", 1), 1, nil},
		{"orders without a limit count once one is set", attempt("sale", "sku-1", "carol", "tok-8", 1), 0, nil},
		{"carol's second without a limit", attempt("sale", "sku-1", "carol", "tok-9", 1), 0, nil},
		{"carol at a limit of two", attempt("sale", "sku-1", "carol", "tok-10", 1), 2, order.ErrOrderLimitReached},
	}
	for i, s := range steps {
		s.o.ID = fmt.Sprintf("order-%d", i)
		_, err := r.PlaceOrder(ctx, order.Placement{Order: s.o, MaxOrders: s.maxOrders, Event: created})
		if (s.want == nil) != (err == nil) || (s.want != nil && !errors.Is(err, s.want)) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
		if err != nil {
			nothingStoredFor(t, r, s.o.ID, s.o.EntryTokenID)
		}
	}
	// alice 1 + 3 + 1, bob 1, carol 1 + 1 from sku-1's 10.
	if got := stockOf(t, r, "sale", "sku-1"); got != 2 {
		t.Fatalf("sku-1 stock %d after the orders, want 2", got)
	}
}

// concurrentOrderLimit: twenty concurrent orders of one person with twenty
// tokens at a limit of one: one is placed, nineteen refused, one unit of
// stock taken.
func concurrentOrderLimit(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "sale", 10)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = r.PlaceOrder(ctx, order.Placement{Order: attempt("sale", "sku-1", "alice", fmt.Sprintf("tok-%d", i), 1), MaxOrders: 1, Event: created})
		})
	}
	wg.Wait()
	placed, refused := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			placed++
		case errors.Is(err, order.ErrOrderLimitReached):
			refused++
		default:
			t.Errorf("order %d: %v", i, err)
		}
	}
	if placed != 1 || refused != n-1 || stockOf(t, r, "sale", "sku-1") != 9 {
		t.Fatalf("%d placed, %d refused, stock %d; want 1, %d, 9", placed, refused, stockOf(t, r, "sale", "sku-1"), n-1)
	}
}
