package pg_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

func product(id, queue string, stock int) order.Product {
	return order.Product{ID: id, QueueID: queue, Name: "Product " + id, Stock: stock, PriceCents: 1999}
}

func TestUpsertProduct(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()

	before := time.Now().Add(-time.Minute) // the server's clock may differ a little
	created, isNew, err := db.UpsertProduct(ctx, product("shoe", "q1", 10))
	if err != nil || !isNew {
		t.Fatalf("first UpsertProduct = created %v, %v; want true, nil", isNew, err)
	}
	if created.Stock != 10 || created.Name != "Product shoe" || created.PriceCents != 1999 || created.QueueID != "q1" {
		t.Fatalf("created %+v", created)
	}
	if created.UpdatedAt.Before(before) || created.UpdatedAt.Location() != time.UTC {
		t.Fatalf("UpdatedAt %v: want the database's now, in UTC", created.UpdatedAt)
	}

	upd := order.Product{ID: "shoe", QueueID: "q2", Name: "Shoe", Stock: 7, PriceCents: 2500}
	updated, isNew, err := db.UpsertProduct(ctx, upd)
	if err != nil || isNew {
		t.Fatalf("second UpsertProduct = created %v, %v; want false, nil", isNew, err)
	}
	upd.UpdatedAt = updated.UpdatedAt
	if updated != upd || updated.UpdatedAt.Before(created.UpdatedAt) {
		t.Fatalf("updated %+v, want %+v not older than %v", updated, upd, created.UpdatedAt)
	}
	got, err := db.Product(ctx, "shoe")
	if err != nil || got != updated {
		t.Fatalf("Product = %+v, %v; want %+v", got, err, updated)
	}
	if n := count(t, raw, `SELECT count(*) FROM products`); n != 1 {
		t.Fatalf("%d product rows, want 1", n)
	}

	if _, err := db.Product(ctx, "nope"); !errors.Is(err, order.ErrProductNotFound) {
		t.Fatalf("Product(nope) = %v, want ErrProductNotFound", err)
	}
	if _, _, err := db.UpsertProduct(ctx, product("bad", "q1", -1)); err == nil {
		t.Fatal("negative stock accepted")
	}
	if _, err := db.Product(ctx, "bad"); !errors.Is(err, order.ErrProductNotFound) {
		t.Fatalf("product with negative stock was stored: %v", err)
	}
}

func TestProductsByQueue(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	ctx := context.Background()
	for _, p := range []order.Product{product("c", "q1", 1), product("a", "q1", 2), product("b", "q2", 3), product("d", "q1", 0)} {
		mustUpsert(t, db, p)
	}
	ps, err := db.Products(ctx, "q1")
	if err != nil {
		t.Fatalf("Products: %v", err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	if want := []string{"a", "c", "d"}; !slices.Equal(ids, want) {
		t.Fatalf("Products(q1) ids %v, want %v", ids, want)
	}
	if ps[0].Stock != 2 || ps[1].Stock != 1 || ps[2].Stock != 0 {
		t.Fatalf("stocks %d %d %d, want 2 1 0", ps[0].Stock, ps[1].Stock, ps[2].Stock)
	}
	if ps, err := db.Products(ctx, "empty"); err != nil || len(ps) != 0 {
		t.Fatalf("Products(empty) = %v, %v; want none", ps, err)
	}
}

func TestQueueIDsAreTheQueuesWithProducts(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	ctx := context.Background()
	if ids, err := db.QueueIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("QueueIDs of an empty database = %v, %v; want none", ids, err)
	}
	for _, p := range []order.Product{product("a", "sale-b", 1), product("b", "sale-a", 0), product("c", "sale-b", 3)} {
		if _, _, err := db.UpsertProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := db.QueueIDs(ctx); err != nil || !slices.Equal(ids, []string{"sale-a", "sale-b"}) {
		t.Fatalf("QueueIDs = %v, %v; want [sale-a sale-b]", ids, err)
	}
	// Moving the last product out of a queue drops the queue.
	if _, _, err := db.UpsertProduct(ctx, product("b", "sale-b", 0)); err != nil {
		t.Fatal(err)
	}
	if ids, err := db.QueueIDs(ctx); err != nil || !slices.Equal(ids, []string{"sale-b"}) {
		t.Fatalf("QueueIDs after the move = %v, %v; want [sale-b]", ids, err)
	}
}
