// Package order is what an order and a product are, the rules for placing
// an order behind an entry token, and the order-service's use cases: place
// (at most once per Idempotency-Key), read an order, list and put products,
// reap abandoned attempts. It knows nothing of gin, gorm, go-redis,
// amqp091-go or protobuf: the adapters implement its ports and encode its
// events.
package order

import (
	"errors"
	"time"
)

// Errors of the order path. Adapters wrap them; the HTTP edge maps them.
var (
	// ErrSoldOut: not enough stock for the quantity. Not restorable.
	ErrSoldOut = errors.New("sold out")
	// ErrOrderLimitReached: the person has as many orders in this queue as
	// its maxOrdersPerUser allows. Not restorable.
	ErrOrderLimitReached = errors.New("order limit per person reached")
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
	// ErrAttemptFailed: the order's attempt was recorded as failed (by
	// the reaper, or by a failure path that found no order) before its
	// transaction could commit; nothing was stored. Its token is on its
	// way back.
	ErrAttemptFailed = errors.New("the order attempt was recorded as failed")
	// ErrNothingStored marks a failed transaction the database is known
	// not to have committed: it answered with an error, or nothing was
	// sent (no connection). A timeout or a lost connection is not known:
	// the COMMIT may have landed.
	ErrNothingStored = errors.New("nothing was stored")
	// ErrOrderPlaced: a Failed event was refused because its attempt's
	// order committed (the commit's answer was lost or late).
	ErrOrderPlaced = errors.New("the order attempt committed an order")
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
	// Bypassed: taken without an entry token while Redis was unreachable,
	// on a queue that fails OPEN; EntryTokenID is then "bypass-" + ID.
	Bypassed bool
}

// StatusCreated is the status of a committed order.
const StatusCreated = "CREATED"

// OutboxEvent is an event as the outbox stores it and the relay publishes
// it: encoded by the adapter that wrote it (Payload is the message body, Type
// its full message name). EventID is unique (duplicates are dropped).
type OutboxEvent struct {
	EventID    string
	RoutingKey string
	Type       string
	Payload    []byte
	OccurredAt time.Time
	// Attempt is the order attempt the event resolves (Event.Attempt):
	// the outbox holds one event per attempt.
	Attempt string
	// QueueID is the queue the order (or failure) was in: the history
	// counts each queue's orders per minute from the outbox.
	QueueID string
	// TraceParent and TraceState are the W3C trace context the event was
	// written in: its publish continues that trace. Empty when untraced.
	TraceParent, TraceState string
}

// StoredAnswer is the answer the first request with an Idempotency-Key got,
// kept under (user, key) and given again, byte for byte, to its retries: the
// status and body the HTTP port rendered. The order path never reads it; it
// keeps it when the outcome is final and forgets the claim otherwise.
type StoredAnswer struct {
	Status int
	Body   []byte
	// Done is false while the first request is still running.
	Done bool
}
