package order

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// BypassTokenPrefix starts the entry token id of a bypassed order: the
// order's id follows, so each has one of its own (orders hold one order per
// token id).
const BypassTokenPrefix = "bypass-"

// redisKnownDown reports whether the configurations' last refresh failed
// to reach Redis.
func (s *Service) redisKnownDown() bool {
	return s.o.Configs != nil && !s.o.Configs.Reachable()
}

// failsOpen returns q's cached configuration when q lets orders through
// without a token while Redis is away (queue.Config.Bypasses: fails OPEN,
// OPEN, started).
func (s *Service) failsOpen(q string) (queue.Config, bool) {
	if s.o.Configs == nil {
		return queue.Config{}, false
	}
	cfg, ok := s.o.Configs.Get(q)
	return cfg, ok && cfg.Bypasses(time.Now())
}

// outage answers an order request that met a Redis outage (cause). A queue
// that fails OPEN takes the order without an entry token: no token is
// checked, consumed or settled; this replica holds the queue's orders to
// its admission rate (before the key is claimed, as Screen's limits are);
// the Idempotency-Key works as usual, being in the database; the order is
// placed as any other (stock, maxOrdersPerUser), marked Bypassed. Any other
// queue answers unavailable (503), as it always did.
func (s *Service) outage(ctx context.Context, r PlaceRequest, key string, render Render, cause error) (StoredAnswer, bool, error) {
	if !queue.ValidUserID(r.UserID) || len(s.Check(r)) > 0 {
		return render(Order{}, ErrInvalidRequest), false, nil
	}
	cfg, open := s.failsOpen(r.QueueID)
	if !open {
		if !errors.Is(cause, queue.ErrUnavailable) {
			cause = fmt.Errorf("%w: %w", queue.ErrUnavailable, cause)
		}
		return render(Order{}, cause), false, nil
	}
	if err := s.bypass.allow(r.QueueID, cfg.AdmissionRatePerSec); err != nil {
		return render(Order{}, err), false, nil
	}
	return s.placeKeyed(ctx, r, key, render, func(ctx context.Context, r PlaceRequest) (Order, error) {
		return s.placeBypassed(ctx, r, cfg.MaxOrdersPerUser)
	})
}

// placeBypassed places an order without an entry token. A failure records
// no OrderFailed: there is no token to give back nor slot to free.
func (s *Service) placeBypassed(ctx context.Context, r PlaceRequest, maxOrders int64) (Order, error) {
	orderID, err := newOrderID()
	if err != nil {
		return Order{}, err
	}
	start := time.Now()
	defer s.health.begin(r.QueueID)()
	o, err := s.repo.PlaceOrder(ctx, Order{
		ID: orderID, UserID: r.UserID, QueueID: r.QueueID, ProductID: r.ProductID, Quantity: r.Quantity,
		EntryTokenID: BypassTokenPrefix + orderID, Status: StatusCreated, Bypassed: true,
	}, maxOrders, func(o Order) Event { return Created{Order: o} })
	s.health.finished(r.QueueID, time.Since(start), err)
	if err != nil {
		return Order{}, err
	}
	return o, nil
}

// localLimits hold each fail-OPEN queue's bypassed orders to its admission
// rate while Redis, which paces the line, is gone: a token bucket per queue
// in this replica (n replicas let n times the rate through), filled at the
// rate and holding a tenth of a second of it plus one, so a crowd let
// straight to the order form cannot hit the database all at once.
type localLimits struct {
	mu      sync.Mutex
	byQueue map[string]*rate.Limiter
}

func newLocalLimits() *localLimits {
	return &localLimits{byQueue: map[string]*rate.Limiter{}}
}

// allow takes one order from q's bucket at perSec a second, or returns a
// *RateLimitedError saying when there will be one.
func (l *localLimits) allow(q string, perSec float64) error {
	limit, burst := rate.Limit(perSec), int(math.Ceil(perSec/10))+1
	l.mu.Lock()
	lim, ok := l.byQueue[q]
	switch {
	case !ok:
		lim = rate.NewLimiter(limit, burst)
		l.byQueue[q] = lim
	case lim.Limit() != limit || lim.Burst() != burst:
		// The rate changed since (the last configuration read).
		lim.SetLimit(limit)
		lim.SetBurst(burst)
	}
	l.mu.Unlock()
	now := time.Now()
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return &RateLimitedError{RetryAfter: time.Second}
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return &RateLimitedError{RetryAfter: max(wait, 100*time.Millisecond)}
	}
	return nil
}
