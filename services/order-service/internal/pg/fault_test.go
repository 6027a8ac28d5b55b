package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

func TestDatabaseCutIsUnavailableThenRecovers(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresURL(t)
	raw := rawDB(t, dsn) // direct, not through the proxy
	proxy := testenv.StartProxy(t, testenv.PostgresAddr(t, dsn))
	o := testOptions(t)
	o.TxTimeout = 2 * time.Second
	db := open(t, testenv.PostgresURLVia(t, dsn, proxy.Addr()), o)
	ctx := context.Background()
	p := mustUpsert(t, db, product("p", "q1", 100))
	if _, err := db.PlaceOrder(ctx, newOrder(p, 0, 1), 0, createdEvent); err != nil {
		t.Fatalf("order before the cut: %v", err)
	}

	proxy.Cut()
	start := time.Now()
	_, err := db.PlaceOrder(ctx, newOrder(p, 1, 1), 0, createdEvent)
	took := time.Since(start)
	if !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("order while cut: %v, want ErrUnavailable", err)
	}
	// The TxTimeout context fires at 2s at the latest; allow scheduling slack.
	if took > o.TxTimeout+time.Second {
		t.Fatalf("order while cut took %v, want it bounded by TxTimeout %v", took, o.TxTimeout)
	}
	t.Logf("order while cut failed after %v: %v", took, err)
	if err := db.Ping(ctx); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("Ping while cut: %v, want ErrUnavailable", err)
	}
	if _, _, err := db.OrderByToken(ctx, "token-0"); !errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("OrderByToken while cut: %v, want ErrUnavailable", err)
	}
	if n := count(t, raw, `SELECT stock FROM products WHERE id = 'p'`); n != 99 {
		t.Fatalf("stock %d after the failed order, want 99", n)
	}

	proxy.Restore()
	// The pool drops its dead connections by itself: no reopening. Allow a
	// few attempts for a connection that died silently while idle.
	deadline := time.Now().Add(10 * time.Second)
	attempts := 0
	for {
		attempts++
		_, err = db.PlaceOrder(ctx, newOrder(p, 2, 1), 0, createdEvent)
		if err == nil {
			break
		}
		if !errors.Is(err, order.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("order after Restore (attempt %d): %v", attempts, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("order after Restore succeeded at attempt %d", attempts)
	if n := count(t, raw, `SELECT stock FROM products WHERE id = 'p'`); n != 98 {
		t.Fatalf("stock %d, want 98", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM orders`); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
}

func TestCanceledContextPassesThrough(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	p := mustUpsert(t, db, product("p", "q1", 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := db.PlaceOrder(ctx, newOrder(p, 1, 1), 0, createdEvent)
	if !errors.Is(err, context.Canceled) || errors.Is(err, order.ErrUnavailable) {
		t.Fatalf("PlaceOrder with a canceled context: %v, want context.Canceled and not ErrUnavailable", err)
	}
	if got, _ := db.Product(context.Background(), "p"); got.Stock != 1 {
		t.Fatalf("stock %d, want 1", got.Stock)
	}
}
