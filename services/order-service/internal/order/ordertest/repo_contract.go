package ordertest

import (
	"context"
	"testing"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// NewRepoFunc makes an empty order database for one test. Products are put
// through its Catalog, as an operator puts them.
type NewRepoFunc func(t *testing.T) order.Repo

// repoCase is one case of a Repo contract, run on a fresh database.
type repoCase struct {
	name string
	run  func(t *testing.T, r order.Repo)
}

func runRepoCases(t *testing.T, newRepo NewRepoFunc, cases []repoCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newRepo(t))
		})
	}
}

// put puts product id with stock in queue q, as an operator does.
func put(t *testing.T, r order.Repo, id, q string, stock int) order.Product {
	t.Helper()
	p, _, err := r.UpsertProduct(context.Background(), order.Product{ID: id, QueueID: q, Name: "Product " + id, Stock: stock, PriceCents: 1999})
	if err != nil {
		t.Fatalf("put product %s: %v", id, err)
	}
	return p
}
