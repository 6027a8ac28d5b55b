package app

import (
	"context"
	"time"
)

// Limiter is a rate limit by key. redisstore.RateLimiter implements it.
type Limiter interface {
	Allow(ctx context.Context, key string) (bool, time.Duration, error)
}

// Limits are the per-client limits in front of enter and challenge; either
// may be nil (no limit). A person makes one request of each, so they are
// counted apart.
type Limits struct {
	Enter, Challenge Limiter
}

// AllowEnter charges client (the caller's address as clientkey.Of keys it)
// to the enter limit. It runs before the caller's login is even checked, so
// a flood costs one limiter call per request. It reports false and how long
// to wait when the limit is used up, an error when the limiter did not
// answer; either is an enter's outcome for Metrics. While Redis does not
// answer, an enter on q, a queue that bypasses (queue.Config.Bypasses),
// goes on unlimited: it will answer BYPASS, and the order-service holds
// the orders to the queue's rate.
func (s *Service) AllowEnter(ctx context.Context, q, client string) (bool, time.Duration, error) {
	ok, retry, err := allow(ctx, s.limits.Enter, client)
	if cfg, open := s.failsOpen(q, err); open && cfg.Bypasses(time.Now()) {
		return true, 0, nil
	}
	switch {
	case err != nil:
		s.m.Entered(outcomeUnavailable)
	case !ok:
		s.m.Entered(outcomeRateLimited)
	}
	return ok, retry, err
}

// AllowChallenge charges client to the challenge limit, as AllowEnter does
// to the enter limit.
func (s *Service) AllowChallenge(ctx context.Context, client string) (bool, time.Duration, error) {
	return allow(ctx, s.limits.Challenge, client)
}

func allow(ctx context.Context, l Limiter, key string) (bool, time.Duration, error) {
	if l == nil {
		return true, 0, nil
	}
	return l.Allow(ctx, key)
}
