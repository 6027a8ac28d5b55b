package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/google/uuid"

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
	PlaceOrder(ctx context.Context, o Order, event func(Order) (OutboxEvent, error)) (Order, error)
	AddEvent(ctx context.Context, e OutboxEvent) (bool, error)
	OrderByToken(ctx context.Context, tokenID string) (Order, bool, error)
	// QueueIDs lists the queues with products in this database: the
	// queues whose consumed tokens this service answers for.
	QueueIDs(ctx context.Context) ([]string, error)
}

// DirectPublisher publishes one event straight to the broker, with confirm.
// It is the fallback for recording a failure when the database, and so the
// outbox, is what failed.
type DirectPublisher interface {
	PublishEvent(ctx context.Context, e OutboxEvent) error
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
}

// Service places orders behind entry tokens.
type Service struct {
	tokens Tokens
	repo   Repo
	direct DirectPublisher
	limits Limits
	log    *slog.Logger
	o      Options
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
	return &Service{tokens: tokens, repo: repo, direct: direct, limits: limits, log: log, o: o}, nil
}

// PlaceRequest is one order attempt.
type PlaceRequest struct {
	UserID    string
	QueueID   string
	ProductID string
	Quantity  int
	// Token is the entry token secret from X-Entry-Token.
	Token string
}

var productIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// ValidProductID reports whether id is an acceptable product id.
func ValidProductID(id string) bool { return productIDPattern.MatchString(id) }

// Check validates a request before anything is touched.
func (s *Service) Check(r PlaceRequest) []queue.FieldError {
	var errs []queue.FieldError
	if !queue.ValidID(r.QueueID) {
		errs = append(errs, queue.FieldError{Field: "queueId", Message: "must be a valid queue id"})
	}
	if !ValidProductID(r.ProductID) {
		errs = append(errs, queue.FieldError{Field: "productId", Message: "must match ^[A-Za-z0-9_.:-]{1,64}$"})
	}
	if r.Quantity < 1 || r.Quantity > s.o.MaxQuantity {
		errs = append(errs, queue.FieldError{Field: "quantity", Message: fmt.Sprintf("must be between 1 and %d", s.o.MaxQuantity)})
	}
	return errs
}

// Screen is the cheap gate every order request passes before anything
// else: one read-only Redis call checks the entry token, then the right
// limit is charged. A request with a usable token counts against the
// queue's limit and may go on (nil): store its Idempotency-Key, then Place.
// Any other request counts against its user's own limit and never reaches
// the database: ErrTokenSpent for the holder of a spent token (who may
// have a stored answer replayed), queue.ErrInvalidToken or a
// *queue.NotActiveError otherwise, or a *RateLimitedError once the user's
// limit is used up. So junk from one login cannot use up the queue's
// limit, and buyers behind it are not locked out.
func (s *Service) Screen(ctx context.Context, r PlaceRequest) error {
	if !queue.ValidUserID(r.UserID) || len(s.Check(r)) > 0 {
		return ErrInvalidRequest
	}
	chk := queue.TokenCheck{State: queue.TokenInvalid}
	if r.Token != "" && len(r.Token) <= maxTokenBytes {
		var err error
		if chk, err = s.tokens.CheckToken(ctx, r.QueueID, r.UserID, r.Token); err != nil {
			return err
		}
	}
	if chk.State == queue.TokenValid {
		return s.charge(ctx, s.limits.Queue, r.QueueID, false)
	}
	if err := s.charge(ctx, s.limits.User, r.UserID, true); err != nil {
		return err
	}
	switch chk.State {
	case queue.TokenNotActive:
		return &queue.NotActiveError{Wait: chk.Wait}
	case queue.TokenSpent:
		return ErrTokenSpent
	}
	return queue.ErrInvalidToken
}

// maxTokenBytes bounds a presented entry token; real ones are 32 hex
// characters, so anything much longer is refused without a lookup.
const maxTokenBytes = 128

func (s *Service) charge(ctx context.Context, l Limiter, key string, perUser bool) error {
	if l == nil {
		return nil
	}
	ok, retry, err := l.Allow(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return &RateLimitedError{RetryAfter: max(retry, 100*time.Millisecond), PerUser: perUser}
	}
	return nil
}

// Place runs one order that passed Screen: the token consumed exactly
// once (consume is the authority, whatever Screen saw), the order
// transaction, then settle on success or a recorded OrderFailed on
// failure, after which the dispatcher restores the token (restorable) or
// frees the slot.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (Order, error) {
	if !queue.ValidUserID(r.UserID) || len(s.Check(r)) > 0 {
		return Order{}, ErrInvalidRequest
	}
	if r.Token == "" {
		return Order{}, queue.ErrInvalidToken
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Order{}, fmt.Errorf("order id: %w", err)
	}
	orderID := id.String()
	c, err := s.tokens.Consume(ctx, r.QueueID, r.UserID, r.Token, orderID, s.o.Lease, s.o.SlotGrace)
	if err != nil {
		return Order{}, err
	}
	o, err := s.repo.PlaceOrder(ctx, Order{
		ID: orderID, UserID: r.UserID, QueueID: r.QueueID, ProductID: r.ProductID, Quantity: r.Quantity,
		EntryTokenID: c.TokenID, Status: StatusCreated,
	}, func(o Order) (OutboxEvent, error) { return orderCreated(o) })
	if err != nil {
		s.failed(ctx, r.QueueID, r.UserID, c.TokenID, orderID, c.ExpiresAt, err)
		return Order{}, err
	}
	// The order is committed; settling frees the slot. If Redis is down now
	// the reaper settles when the lease runs out.
	if _, serr := s.tokens.Settle(context.WithoutCancel(ctx), r.QueueID, r.UserID, c.TokenID, o.ID); serr != nil {
		s.log.Warn("settle after commit failed; the reaper will settle", "order", o.ID, "err", serr)
	}
	return o, nil
}
