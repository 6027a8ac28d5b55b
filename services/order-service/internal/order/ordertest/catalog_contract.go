package ordertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// RunCatalogContract states what the product pages and the reaper rely on
// from order.Catalog: a product is created or replaced by its id, listed
// by queue in id order, and a queue sells in this database while it has a
// product here.
func RunCatalogContract(t *testing.T, newRepo NewRepoFunc) {
	runRepoCases(t, newRepo, []repoCase{
		{"UpsertCreatesThenReplaces", upsertCreatesThenReplaces},
		{"ProductsAreTheQueuesInIDOrder", productsInIDOrder},
		{"QueueIDsAreTheQueuesWithProducts", queueIDs},
		{"AProductMovesWithItsID", productMoves},
		{"NegativeStockOrPriceIsRefused", negativeRefused},
	})
}

// sameProduct compares products, their times by instant.
func sameProduct(a, b order.Product) bool {
	ta, tb := a.UpdatedAt, b.UpdatedAt
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	return a == b && ta.Equal(tb)
}

func upsertCreatesThenReplaces(t *testing.T, r order.Repo) {
	ctx := context.Background()
	p := order.Product{ID: "sku-1", QueueID: "sale", Name: "Sneaker", Stock: 10, PriceCents: 12999}
	for _, step := range []struct {
		name    string
		p       order.Product
		created bool
	}{
		{"a new product", p, true},
		{"the same id, new values", order.Product{ID: "sku-1", QueueID: "sale", Name: "Sneaker II", Stock: 0, PriceCents: 0}, false},
	} {
		before := time.Now().Add(-time.Second)
		got, created, err := r.UpsertProduct(ctx, step.p)
		if err != nil || created != step.created {
			t.Fatalf("%s: created %v %v, want %v", step.name, created, err, step.created)
		}
		want := step.p
		want.UpdatedAt = got.UpdatedAt
		if got != want || got.UpdatedAt.Before(before) || got.UpdatedAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("%s: stored %+v, want %+v updated now", step.name, got, step.p)
		}
		ps, err := r.Products(ctx, "sale")
		if err != nil || len(ps) != 1 || !sameProduct(ps[0], got) {
			t.Fatalf("%s: listed %+v %v, want only %+v", step.name, ps, err, got)
		}
	}
}

func productsInIDOrder(t *testing.T, r order.Repo) {
	ctx := context.Background()
	for _, p := range []struct{ id, q string }{{"b", "sale"}, {"c", "sale"}, {"x", "other"}, {"a", "sale"}} {
		put(t, r, p.id, p.q, 1)
	}
	for _, tc := range []struct {
		q    string
		want []string
	}{{"sale", []string{"a", "b", "c"}}, {"other", []string{"x"}}, {"none", nil}} {
		ps, err := r.Products(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range ps {
			if p.QueueID != tc.q {
				t.Errorf("%s lists %+v of another queue", tc.q, p)
			}
			ids = append(ids, p.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Fatalf("products of %s: %v, want %v", tc.q, ids, tc.want)
		}
	}
}

func queueIDs(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if ids, err := r.QueueIDs(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("queue ids of an empty catalog: %v %v, want none", ids, err)
	}
	put(t, r, "p1", "zeta", 0) // no stock still sells here
	put(t, r, "p2", "alpha", 3)
	put(t, r, "p3", "alpha", 3)
	if ids, err := r.QueueIDs(ctx); err != nil || !slices.Equal(ids, []string{"alpha", "zeta"}) {
		t.Fatalf("queue ids: %v %v, want [alpha zeta]", ids, err)
	}
}

func productMoves(t *testing.T, r order.Repo) {
	ctx := context.Background()
	put(t, r, "sku-1", "spring", 3)
	moved, created, err := r.UpsertProduct(ctx, order.Product{ID: "sku-1", QueueID: "summer", Name: "Moved", Stock: 4, PriceCents: 1})
	if err != nil || created || moved.QueueID != "summer" {
		t.Fatalf("put sku-1 in summer: %+v created %v %v, want it replaced", moved, created, err)
	}
	if ps, err := r.Products(ctx, "spring"); err != nil || len(ps) != 0 {
		t.Fatalf("spring lists %+v %v, want nothing", ps, err)
	}
	if ps, err := r.Products(ctx, "summer"); err != nil || len(ps) != 1 || !sameProduct(ps[0], moved) {
		t.Fatalf("summer lists %+v %v, want %+v", ps, err, moved)
	}
	if ids, err := r.QueueIDs(ctx); err != nil || !slices.Equal(ids, []string{"summer"}) {
		t.Fatalf("queue ids %v %v, want [summer]", ids, err)
	}
}

func negativeRefused(t *testing.T, r order.Repo) {
	ctx := context.Background()
	for _, p := range []order.Product{
		{ID: "sku-1", QueueID: "sale", Name: "Less than none", Stock: -1, PriceCents: 1},
		{ID: "sku-2", QueueID: "sale", Name: "Paid to take", Stock: 1, PriceCents: -1},
	} {
		if got, _, err := r.UpsertProduct(ctx, p); err == nil {
			t.Fatalf("put %+v: stored %+v, want an error", p, got)
		}
	}
	if ps, err := r.Products(ctx, "sale"); err != nil || len(ps) != 0 {
		t.Fatalf("after refused puts: %+v %v, want nothing", ps, err)
	}
}
