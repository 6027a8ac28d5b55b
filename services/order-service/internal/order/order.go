// Package order is what an order is and the rules for placing one behind an
// entry token. It knows nothing of gin, gorm, go-redis or amqp091-go.
package order

import (
	"errors"
	"time"
)

// Errors of the order path. Adapters wrap them; the HTTP edge maps them.
var (
	// ErrSoldOut: not enough stock for the quantity. Not restorable.
	ErrSoldOut = errors.New("sold out")
	// ErrProductNotFound: no such product in this queue.
	ErrProductNotFound = errors.New("product not found")
	// ErrOrderNotFound: no such order (or not the caller's).
	ErrOrderNotFound = errors.New("order not found")
	// ErrDuplicateToken: an order already exists for this entry token.
	ErrDuplicateToken = errors.New("an order exists for this entry token")
	// ErrUnavailable: the database does not answer; restorable.
	ErrUnavailable = errors.New("order database unavailable")
	// ErrIdempotencyInProgress: a request with the same Idempotency-Key is
	// still being processed.
	ErrIdempotencyInProgress = errors.New("a request with this idempotency key is in progress")
)

// Product is something sold through a queue.
type Product struct {
	ID         string
	QueueID    string
	Name       string
	Stock      int
	PriceCents int64
	UpdatedAt  time.Time
}

// Order is a committed order.
type Order struct {
	ID             string
	UserID         string
	QueueID        string
	ProductID      string
	Quantity       int
	EntryTokenID   string
	IdempotencyKey string // "" when none was sent
	Status         string // "CREATED"
	CreatedAt      time.Time
}

// StatusCreated is the status of a committed order.
const StatusCreated = "CREATED"

// OutboxEvent is an event written in the same transaction as the change it
// reports, published afterwards by the relay. Payload is the protobuf body;
// Type its full message name; EventID is unique (duplicates are dropped).
type OutboxEvent struct {
	EventID    string
	RoutingKey string
	Type       string
	Payload    []byte
	OccurredAt time.Time
}

// IdempotentResult is the stored outcome of a request with an
// Idempotency-Key: replayed verbatim for the same user and key.
type IdempotentResult struct {
	Status int
	Body   []byte
	// Done is false while the first request is still running.
	Done bool
}
