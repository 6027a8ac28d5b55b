package order

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Request errors.
var (
	ErrInvalidRequest = errors.New("invalid order request")
	// ErrTokenSpent: the token is the one this user already consumed in
	// this queue. It is an invalid token for a new order; the caller may
	// only replay a stored answer for its holder's retry.
	ErrTokenSpent = fmt.Errorf("%w: already used for an order", queue.ErrInvalidToken)
)

// RateLimitedError: an order rate limit is hit; the token was not
// consumed. PerUser tells the user's own limit (for requests without a
// usable token) from the queue's.
type RateLimitedError struct {
	RetryAfter time.Duration
	PerUser    bool
}

func (e *RateLimitedError) Error() string {
	if e.PerUser {
		return "order rate limit for this user reached"
	}
	return "order rate limit reached"
}

// Options tune the service.
type Options struct {
	// Lease is how long a consumed token may stay unsettled before the
	// reaper acts; well above the transaction timeout.
	Lease time.Duration
	// SlotGrace keeps the slot taken a little past the lease, so the reaper
	// acts before the dispatcher prunes the slot.
	SlotGrace time.Duration
	// MaxQuantity bounds one order.
	MaxQuantity int
	// Metrics observes the requests' outcomes and the reaper; nil records
	// nothing.
	Metrics Metrics
	// Health is told every order attempt past Screen, for the per-queue
	// health reports; nil records nothing.
	Health *Health
	// Configs, when set, lets the queues that fail OPEN take orders while
	// Redis is down (bypass.go) and tells whether it is; nil: every queue
	// fails CLOSED.
	Configs Configs
	// Tokens checks the signed entry tokens that a queue failing OPEN
	// takes while Redis is down (ENTRY_TOKEN_KEYS); nil: it takes none.
	Tokens *grant.Signer
	// OutageMaxOrders is how many orders one person may place in a queue
	// while Redis is down when the queue sets no maxOrdersPerUser
	// (FAIL_OPEN_MAX_ORDERS_PER_USER); 0: no limit.
	OutageMaxOrders int64
}

// Service runs the order-service's use cases; every port (HTTP, the
// reaper loop) goes through it.
type Service struct {
	tokens  Tokens
	repo    Repo
	direct  DirectPublisher
	limits  Limits
	catalog *productCache
	log     *slog.Logger
	m       Metrics
	health  *Health
	bypass  *localLimits
	o       Options
}

// New returns a Service. direct and the limits may be nil.
func New(tokens Tokens, repo Repo, direct DirectPublisher, limits Limits, log *slog.Logger, o Options) (*Service, error) {
	if tokens == nil || repo == nil || log == nil {
		return nil, errors.New("order: tokens, repo and logger are required")
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.SlotGrace <= 0 {
		o.SlotGrace = time.Minute
	}
	if o.MaxQuantity <= 0 {
		o.MaxQuantity = 10
	}
	return &Service{tokens: tokens, repo: repo, direct: direct, limits: limits, catalog: newProductCache(repo), log: log, m: orNop(o.Metrics), health: o.Health,
		bypass: newLocalLimits(), o: o}, nil
}
