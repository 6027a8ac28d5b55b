package order

import (
	"context"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Tokens is the entry-token side of the order path. redisstore.Store
// implements it.
type Tokens interface {
	// CheckToken is the cheap read-only gate in front of everything else.
	CheckToken(ctx context.Context, q, user, secret string) (queue.TokenCheck, error)
	Consume(ctx context.Context, q, user, secret, orderID string, lease, slotGrace time.Duration) (queue.Consumed, error)
	Settle(ctx context.Context, q, user, tokenID, orderID string) (bool, error)
	HandOff(ctx context.Context, q, user, tokenID string) error
	// Overdue lists tokens whose lease has ended by the store's clock (the
	// one that set the deadlines), never the caller's.
	Overdue(ctx context.Context, q string, limit int64) ([]queue.InflightToken, error)
}

// Repo is the order database. pg.DB implements it.
type Repo interface {
	Orders
	Catalog
	Answers
}

// Orders are the orders and the outbox of their events.
type Orders interface {
	// PlaceOrder takes the stock, counts the order against the person's
	// MaxOrders in the queue (0: no limit; ErrOrderLimitReached beyond it),
	// stores the order, the event built from the stored order and, with a
	// Key, the answer its retries get, in one commit. Concurrent orders of
	// one product may share that commit (pg's group commit); each has its
	// own outcome.
	PlaceOrder(ctx context.Context, p Placement) (Order, error)
	// AddEvent writes an event to the outbox on its own; false when one
	// with its id is there already.
	AddEvent(ctx context.Context, e Event) (bool, error)
	// Order returns one order, or an error wrapping ErrOrderNotFound.
	Order(ctx context.Context, id string) (Order, error)
	OrderByToken(ctx context.Context, tokenID string) (Order, bool, error)
}

// Placement is one order for Orders.PlaceOrder and what its commit stores
// with it.
type Placement struct {
	Order Order
	// MaxOrders is the person's order limit in the queue (0: none).
	MaxOrders int64
	// Event builds the order's outbox event from the stored order.
	Event func(Order) Event
	// Key, when not "", is the request's Idempotency-Key (claimed with
	// Answers.BeginIdempotent), and Answer builds from the stored order the
	// answer its retries are given: stored in the order's commit, so an
	// order never stands without it.
	Key    string
	Answer func(Order) StoredAnswer
}

// Catalog is the products table.
type Catalog interface {
	// QueueIDs lists the queues with products in this database: the
	// queues whose consumed tokens this service answers for.
	QueueIDs(ctx context.Context) ([]string, error)
	// Products lists a queue's products, ordered by id.
	Products(ctx context.Context, queueID string) ([]Product, error)
	// UpsertProduct creates or replaces a product; created reports a new
	// one.
	UpsertProduct(ctx context.Context, p Product) (Product, bool, error)
}

// Answers keeps the answers of requests with an Idempotency-Key.
type Answers interface {
	// BeginIdempotent claims (userID, key): fresh when this call claimed
	// it; otherwise the stored answer (Done) or the first request's claim
	// (not Done).
	BeginIdempotent(ctx context.Context, userID, key string) (StoredAnswer, bool, error)
	// LookupIdempotent reads (userID, key)'s record without claiming it.
	LookupIdempotent(ctx context.Context, userID, key string) (StoredAnswer, bool, error)
	// FinishIdempotent stores the answer to replay.
	FinishIdempotent(ctx context.Context, userID, key string, status int, body []byte) error
	// AbandonIdempotent deletes an unfinished claim, so a retry may run.
	AbandonIdempotent(ctx context.Context, userID, key string) error
}

// DirectPublisher publishes one event straight to the broker, with confirm.
// It is the fallback for recording a failure when the database, and so the
// outbox, is what failed.
type DirectPublisher interface {
	PublishEvent(ctx context.Context, e Event) error
}

// Limiter is a rate limit by key (redisstore.RateLimiter).
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, time.Duration, error)
}

// Limits are the order path's rate limits; either may be nil (off).
type Limits struct {
	// Queue counts, per queue, the requests whose token passed the cheap
	// check: the order path's own capacity, which junk cannot use up.
	Queue Limiter
	// User counts, per user, the requests whose token did not: a
	// logged-in client sending junk is slowed down, alone.
	User Limiter
}

// Configs are the queues' configurations as last read from Redis, and
// whether the last read reached it (redisstore.ConfigCache): what tells the
// order path a queue's fail mode, admission rate and order limit while Redis
// is gone.
type Configs interface {
	Get(q string) (queue.Config, bool)
	Reachable() bool
}
