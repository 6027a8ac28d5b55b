package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// RateLimiter is a GCRA limiter shared by every replica through Redis
// (go-redis/redis_rate), so a limit holds for the fleet, not per pod.
type RateLimiter struct {
	lim    *redis_rate.Limiter
	prefix string
	perSec int
}

// NewRateLimiter limits each key to perSec events per second with a burst of
// perSec. Keys are stored under "rate:<prefix><key>".
func NewRateLimiter(rdb redis.UniversalClient, prefix string, perSec int) (*RateLimiter, error) {
	if perSec <= 0 {
		return nil, errors.New("redisstore: rate limit must be positive")
	}
	return &RateLimiter{lim: redis_rate.NewLimiter(rdb), prefix: prefix, perSec: perSec}, nil
}

// Allow takes one event for key. When refused it returns how long until one
// would be allowed.
func (l *RateLimiter) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	res, err := l.lim.Allow(ctx, l.prefix+key, redis_rate.PerSecond(l.perSec))
	if err != nil {
		return false, 0, fmt.Errorf("rate limit: %w", classify(err))
	}
	return res.Allowed > 0, res.RetryAfter, nil
}
