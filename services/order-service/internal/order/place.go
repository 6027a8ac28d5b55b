package order

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// PlaceRequest is one order attempt.
type PlaceRequest struct {
	UserID    string
	QueueID   string
	ProductID string
	Quantity  int
	// Token is the entry token secret from X-Entry-Token.
	Token string

	// keyed, which PlaceOnce sets for a request with an Idempotency-Key,
	// is the key and the answer its retries get after an order, stored in
	// the order's commit. (A pointer keeps PlaceRequest comparable.)
	keyed *keyedAnswer
}

type keyedAnswer struct {
	key    string
	answer func(Order) StoredAnswer
}

// placement is the order o of r for Orders.PlaceOrder.
func (r PlaceRequest) placement(o Order, maxOrders int64) Placement {
	p := Placement{Order: o, MaxOrders: maxOrders, Event: func(o Order) Event { return Created{Order: o} }}
	if r.keyed != nil {
		p.Key, p.Answer = r.keyed.key, r.keyed.answer
	}
	return p
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
// queue's limit and may go on (nil): claim its Idempotency-Key, then Place.
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
// frees the slot. Health is told how it went and how long it took from
// the consume on.
func (s *Service) Place(ctx context.Context, r PlaceRequest) (Order, error) {
	if !queue.ValidUserID(r.UserID) || len(s.Check(r)) > 0 {
		return Order{}, ErrInvalidRequest
	}
	if r.Token == "" {
		return Order{}, queue.ErrInvalidToken
	}
	orderID, err := newOrderID()
	if err != nil {
		return Order{}, err
	}
	start := time.Now()
	defer s.health.begin(r.QueueID)()
	c, err := s.tokens.Consume(ctx, r.QueueID, r.UserID, r.Token, orderID, s.o.Lease, s.o.SlotGrace)
	if err != nil {
		s.health.refused(r.QueueID, err)
		if errors.Is(err, queue.ErrNotReplicated) && c.TokenID != "" {
			// Taken on the Redis primary, not confirmed by its replicas:
			// no order will be placed with it, so it goes back now (a
			// restore of a consume a failover undid changes nothing)
			// rather than when the lease runs out. The buyer's retry
			// finds the token again.
			s.failed(ctx, r.QueueID, r.UserID, c.TokenID, orderID, c.ExpiresAt, err)
		}
		return Order{}, err
	}
	o, err := s.repo.PlaceOrder(ctx, r.placement(Order{
		ID: orderID, UserID: r.UserID, QueueID: r.QueueID, ProductID: r.ProductID, Quantity: r.Quantity,
		EntryTokenID: c.TokenID, Status: StatusCreated,
	}, c.MaxOrders))
	switch {
	case errors.Is(err, ErrAttemptFailed):
		// Recorded failed by the reaper while this transaction was on its
		// way (its lease ran out): the token is going back.
	case err != nil && s.failed(ctx, r.QueueID, r.UserID, c.TokenID, orderID, c.ExpiresAt, err):
		// The error hid a commit (the outbox refused the OrderFailed: see
		// Event.Attempt): the order stands.
		s.settle(ctx, r, c.TokenID, orderID)
		if o, err = s.repo.Order(context.WithoutCancel(ctx), orderID); err == nil {
			s.health.finished(r.QueueID, time.Since(start), nil)
			return o, nil
		}
	}
	if err != nil {
		s.health.finished(r.QueueID, time.Since(start), err)
		return Order{}, err
	}
	s.settle(ctx, r, c.TokenID, o.ID)
	s.health.finished(r.QueueID, time.Since(start), nil)
	return o, nil
}

// settle frees the slot of a committed order. If Redis is down now the
// reaper settles when the lease runs out.
func (s *Service) settle(ctx context.Context, r PlaceRequest, tokenID, orderID string) {
	if _, err := s.tokens.Settle(context.WithoutCancel(ctx), r.QueueID, r.UserID, tokenID, orderID); err != nil {
		s.log.WarnContext(ctx, "settle after commit failed; the reaper will settle", "order", orderID, "err", err)
	}
}

// Order returns order id if it is user's. Someone else's order does not
// exist, as far as the caller knows: ErrOrderNotFound.
func (s *Service) Order(ctx context.Context, user, id string) (Order, error) {
	o, err := s.repo.Order(ctx, id)
	if err != nil {
		return Order{}, err
	}
	if o.UserID != user {
		return Order{}, fmt.Errorf("%w: %s", ErrOrderNotFound, id)
	}
	return o, nil
}

// newOrderID is a fresh order id: a UUIDv7, so ids sort by creation.
func newOrderID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("order id: %w", err)
	}
	return id.String(), nil
}
