package order

import (
	"context"
	"fmt"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// outageSkew is how far the issuer's clock (the dispatcher's, in a signed
// token) may be from this replica's: a token made up to this much "in the
// future" is accepted, and one is taken for live up to this much past its
// time to live.
const outageSkew = 30 * time.Second

// redisKnownDown reports whether this replica's health probe of Redis (the
// configuration cache's refreshes, on connections of their own) has found
// it down: several failures in a row over a window, none since. One
// request's error, a pool exhausted by this replica's own load, a slow
// reply, is never that.
func (s *Service) redisKnownDown() bool {
	return s.o.Configs != nil && !s.o.Configs.Reachable()
}

// failsOpen returns q's cached configuration when q lets orders through
// without Redis while Redis is down (queue.Config.Bypasses: fails OPEN,
// OPEN, started).
func (s *Service) failsOpen(q string) (queue.Config, bool) {
	if s.o.Configs == nil {
		return queue.Config{}, false
	}
	cfg, ok := s.o.Configs.Get(q)
	return cfg, ok && cfg.Bypasses(time.Now())
}

// outage answers an order request while Redis is down. A queue that fails
// OPEN takes orders from holders of an entry token the waiting room signed
// (pkg/grant: checked with ENTRY_TOKEN_KEYS, no Redis) for this queue,
// within its time to live, and from nobody else: what the outage lets
// through is what was admitted before it. Each such order:
//   - is held to the queue's admission rate by this replica's bucket
//     (before the key is claimed, as Screen's limits are);
//   - is one order per token: its entry_token_id is the token's id, which
//     the orders table holds once, so a token used now cannot order again
//     now nor after Redis is back;
//   - counts against the person's maxOrdersPerUser, or OutageMaxOrders
//     when the queue sets none;
//   - keeps its Idempotency-Key (Postgres), takes stock as any other, and
//     is marked Bypassed.
//
// No token, an unsigned or forged one, an expired one: invalid token
// (403). Any other queue, or no signing keys here: unavailable (503).
func (s *Service) outage(ctx context.Context, r PlaceRequest, key string, render Render) (StoredAnswer, bool, error) {
	if !queue.ValidUserID(r.UserID) || len(s.Check(r)) > 0 {
		return render(Order{}, ErrInvalidRequest), false, nil
	}
	cfg, open := s.failsOpen(r.QueueID)
	if !open || s.o.Tokens == nil {
		return render(Order{}, fmt.Errorf("%w: Redis is down", queue.ErrUnavailable)), false, nil
	}
	v, err := s.o.Tokens.Check(r.QueueID, r.Token)
	if err != nil {
		return render(Order{}, fmt.Errorf("%w: %w", queue.ErrInvalidToken, err)), false, nil
	}
	now := time.Now()
	live := time.Duration(cfg.TokenTTLSeconds)*time.Second + time.Duration(cfg.ActivationSpreadMs)*time.Millisecond
	if v.IssuedAt.After(now.Add(outageSkew)) || now.After(v.IssuedAt.Add(live+outageSkew)) {
		return render(Order{}, fmt.Errorf("%w: expired", queue.ErrInvalidToken)), false, nil
	}
	if err := s.bypass.allow(r.QueueID, cfg.AdmissionRatePerSec, time.Now()); err != nil {
		return render(Order{}, err), false, nil
	}
	maxOrders := cfg.MaxOrdersPerUser
	if maxOrders <= 0 {
		maxOrders = s.o.OutageMaxOrders
	}
	return s.placeKeyed(ctx, r, key, render, func(ctx context.Context, r PlaceRequest) (Order, error) {
		return s.placeBypassed(ctx, r, v.TokenID, maxOrders)
	})
}

// placeBypassed places an order with a signed token Redis could not check.
// A failure records no OrderFailed: nothing was consumed in Redis, so
// there is nothing to give back nor a slot to free.
func (s *Service) placeBypassed(ctx context.Context, r PlaceRequest, tokenID string, maxOrders int64) (Order, error) {
	orderID, err := newOrderID()
	if err != nil {
		return Order{}, err
	}
	start := time.Now()
	defer s.health.begin(r.QueueID)()
	o, err := s.repo.PlaceOrder(ctx, r.placement(Order{
		ID: orderID, UserID: r.UserID, QueueID: r.QueueID, ProductID: r.ProductID, Quantity: r.Quantity,
		EntryTokenID: tokenID, Status: StatusCreated, Bypassed: true,
	}, maxOrders))
	s.health.finished(r.QueueID, time.Since(start), err)
	if err != nil {
		return Order{}, err
	}
	return o, nil
}

// localLimits hold each fail-OPEN queue's bypassed orders to its admission
// rate while Redis, which paces the line, is gone: a token bucket per queue
// in this replica (n replicas let n times the rate through), a tenth of a
// second of it plus one (throttle.Paces).
type localLimits struct{ paces throttle.Paces }

func newLocalLimits() *localLimits { return &localLimits{} }

// allow takes one order from q's bucket at perSec a second at now, or
// returns a *RateLimitedError saying when there will be one.
func (l *localLimits) allow(q string, perSec float64, now time.Time) error {
	if wait := l.paces.Take(q, perSec, now); wait > 0 {
		return &RateLimitedError{RetryAfter: max(wait, 100*time.Millisecond)}
	}
	return nil
}
