package order

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Bounds of a product's fields.
const (
	MaxProductName = 200 // characters
	MaxStock       = 1_000_000_000
	MaxPriceCents  = 1_000_000_000_00
)

// InvalidProductError lists every bad field of a product.
type InvalidProductError struct {
	Fields []queue.FieldError
}

func (e *InvalidProductError) Error() string {
	return fmt.Sprintf("invalid product (%d bad fields)", len(e.Fields))
}

// CheckProduct lists what is wrong with p: its id, queue id, name (1 to
// MaxProductName characters), stock (0 to MaxStock) and price (0 to
// MaxPriceCents).
func CheckProduct(p Product) []queue.FieldError {
	var errs []queue.FieldError
	add := func(f, m string) { errs = append(errs, queue.FieldError{Field: f, Message: m}) }
	if !ValidProductID(p.ID) {
		add("productId", "must match ^[A-Za-z0-9_.:-]{1,64}$")
	}
	if !queue.ValidID(p.QueueID) {
		add("queueId", "must be a valid queue id")
	}
	if p.Name == "" || utf8.RuneCountInString(p.Name) > MaxProductName {
		add("name", fmt.Sprintf("must be 1 to %d characters", MaxProductName))
	}
	if p.Stock < 0 || p.Stock > MaxStock {
		add("stock", fmt.Sprintf("must be 0 to %d", MaxStock))
	}
	if p.PriceCents < 0 || p.PriceCents > MaxPriceCents {
		add("priceCents", fmt.Sprintf("must be 0 to %d", int64(MaxPriceCents)))
	}
	return errs
}

// PutProduct creates p or replaces the product with its id (queue, name,
// stock, price); created reports a new one. An invalid p is refused with
// an *InvalidProductError before anything is written. This replica's
// product list of the queue is fresh at once.
func (s *Service) PutProduct(ctx context.Context, p Product) (Product, bool, error) {
	if errs := CheckProduct(p); len(errs) > 0 {
		return Product{}, false, &InvalidProductError{Fields: errs}
	}
	stored, created, err := s.repo.UpsertProduct(ctx, p)
	if err != nil {
		return Product{}, false, err
	}
	s.catalog.forget(stored.QueueID)
	return stored, created, nil
}

// Products is queue q's product list for the public (the waiting page
// shows it), up to a second old: see productCache.
func (s *Service) Products(ctx context.Context, q string) ([]Product, error) {
	return s.catalog.Products(ctx, q)
}
