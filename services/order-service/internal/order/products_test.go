package order_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// PutProduct writes only a product that follows every rule, and says which
// fields break one.
func TestPutProduct(t *testing.T) {
	good := order.Product{ID: "sku-1", QueueID: "sale", Name: "Sneaker", Stock: 100, PriceCents: 12999}
	with := func(f func(*order.Product)) order.Product { p := good; f(&p); return p }
	for _, tc := range []struct {
		name string
		p    order.Product
		bad  []string // fields refused; none = written
	}{
		{"valid", good, nil},
		{"bounds are in", with(func(p *order.Product) {
			p.Name, p.Stock, p.PriceCents = strings.Repeat("é", order.MaxProductName), order.MaxStock, order.MaxPriceCents
		}), nil},
		{"zero stock and price", with(func(p *order.Product) { p.Stock, p.PriceCents = 0, 0 }), nil},
		{"bad id", with(func(p *order.Product) { p.ID = "sku 1" }), []string{"productId"}},
		{"bad queue", with(func(p *order.Product) { p.QueueID = "Sale" }), []string{"queueId"}},
		{"empty name", with(func(p *order.Product) { p.Name = "" }), []string{"name"}},
		{"long name", with(func(p *order.Product) { p.Name = strings.Repeat("é", order.MaxProductName+1) }), []string{"name"}},
		{"negative stock", with(func(p *order.Product) { p.Stock = -1 }), []string{"stock"}},
		{"too much stock", with(func(p *order.Product) { p.Stock = order.MaxStock + 1 }), []string{"stock"}},
		{"negative price", with(func(p *order.Product) { p.PriceCents = -1 }), []string{"priceCents"}},
		{"too dear", with(func(p *order.Product) { p.PriceCents = order.MaxPriceCents + 1 }), []string{"priceCents"}},
		{"everything wrong", order.Product{ID: "", QueueID: "", Name: "", Stock: -1, PriceCents: -1},
			[]string{"productId", "queueId", "name", "stock", "priceCents"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := ordertest.NewRepo()
			svc := newService(t, ordertest.NewTokens(), repo, nil, order.Limits{})
			got, created, err := svc.PutProduct(context.Background(), tc.p)
			if tc.bad == nil {
				// The database stamps the time of the write.
				want := tc.p
				want.UpdatedAt = got.UpdatedAt
				if err != nil || !created || got != want || got.UpdatedAt.IsZero() || repo.Calls("UpsertProduct") != 1 {
					t.Fatalf("PutProduct = %+v, %v, %v after %d writes; want it written and created", got, created, err, repo.Calls("UpsertProduct"))
				}
				return
			}
			var ip *order.InvalidProductError
			if !errors.As(err, &ip) {
				t.Fatalf("PutProduct: %v, want an InvalidProductError", err)
			}
			var fields []string
			for _, f := range ip.Fields {
				if f.Message == "" {
					t.Errorf("field %s refused without a message", f.Field)
				}
				fields = append(fields, f.Field)
			}
			if !slices.Equal(fields, tc.bad) || repo.Calls("UpsertProduct") != 0 {
				t.Fatalf("refused %v after %d writes, want %v and none", fields, repo.Calls("UpsertProduct"), tc.bad)
			}
		})
	}
}

// The product list is cached, yet a product put through this replica is
// in it at once.
func TestPutProductRefreshesTheList(t *testing.T) {
	repo := ordertest.NewRepo()
	svc := newService(t, ordertest.NewTokens(), repo, nil, order.Limits{})
	ctx := context.Background()
	put := func(id string, stock int) {
		t.Helper()
		if _, _, err := svc.PutProduct(ctx, order.Product{ID: id, QueueID: "sale", Name: id, Stock: stock}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []order.Product {
		t.Helper()
		ps, err := svc.Products(ctx, "sale")
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	put("a", 1)
	if ps := list(); len(ps) != 1 || ps[0].Stock != 1 {
		t.Fatalf("list %+v, want a with 1", ps)
	}
	list()
	if n := repo.Calls("Products"); n != 1 {
		t.Fatalf("two reads made %d list queries, want 1", n)
	}
	put("a", 5)
	put("b", 2)
	if ps := list(); len(ps) != 2 || ps[0].Stock != 5 || ps[1].ID != "b" {
		t.Fatalf("after two puts: %+v, want a with 5 and b", ps)
	}
	if n := repo.Calls("Products"); n != 2 {
		t.Fatalf("%d list queries, want 2", n)
	}
}

// An order is only ever its buyer's: anyone else is told it does not
// exist.
func TestOrderIsOnlyItsBuyers(t *testing.T) {
	repo := stocked(t)
	if _, err := repo.PlaceOrder(context.Background(), order.Placement{Order: order.Order{ID: "o-1", UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, EntryTokenID: "tok-1"}, Event: func(o order.Order) order.Event { return order.Created{Order: o} }}); err != nil {
		t.Fatal(err)
	}
	svc := newService(t, ordertest.NewTokens(), repo, nil, order.Limits{})
	for _, tc := range []struct {
		user, id string
		found    bool
	}{{"alice", "o-1", true}, {"bob", "o-1", false}, {"alice", "o-2", false}} {
		o, err := svc.Order(context.Background(), tc.user, tc.id)
		switch {
		case tc.found && (err != nil || o.ID != tc.id):
			t.Errorf("%s reads %s: %+v, %v", tc.user, tc.id, o, err)
		case !tc.found && (!errors.Is(err, order.ErrOrderNotFound) || o != order.Order{}):
			t.Errorf("%s reads %s: %+v, %v; want ErrOrderNotFound and nothing", tc.user, tc.id, o, err)
		}
	}
}
