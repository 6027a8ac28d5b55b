package pg_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// testOptions keep the pool small (tests share one server with
// max_connections 100) and the timeout generous (2 noisy cores, -race).
func testOptions(t testing.TB) pg.Options {
	return pg.Options{
		MaxOpenConns: 20,
		TxTimeout:    30 * time.Second,
		Log:          slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func open(t testing.TB, dsn string, o pg.Options) *pg.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pg.Open(ctx, dsn, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// newDB opens the adapter on a fresh database; raw is a plain connection to
// the same database for checking what was stored.
func newDB(t testing.TB) (db *pg.DB, raw *sql.DB, dsn string) {
	t.Helper()
	dsn = testenv.PostgresURL(t)
	db = open(t, dsn, testOptions(t))
	return db, rawDB(t, dsn), dsn
}

func rawDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(2)
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

func count(t testing.TB, raw *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := raw.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func mustUpsert(t testing.TB, db *pg.DB, p order.Product) order.Product {
	t.Helper()
	got, _, err := db.UpsertProduct(context.Background(), p)
	if err != nil {
		t.Fatalf("UpsertProduct(%s): %v", p.ID, err)
	}
	return got
}

// newOrder is an order of quantity q on product p for a user; the token id
// is derived from n so each call can have its own.
func newOrder(p order.Product, n, q int) order.Order {
	return order.Order{
		UserID:       fmt.Sprintf("user-%d", n),
		QueueID:      p.QueueID,
		ProductID:    p.ID,
		Quantity:     q,
		EntryTokenID: fmt.Sprintf("token-%d", n),
	}
}

// createdEvent is the service's OrderCreated builder.
func createdEvent(o order.Order) order.Event { return order.Created{Order: o} }
