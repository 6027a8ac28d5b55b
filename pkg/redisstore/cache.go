package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// ConfigCache keeps every known queue's configuration in memory, refreshed
// from Redis every interval (one SMEMBERS and one pipelined round of
// HGETALL), so a service knows what a queue asks of it, its fail mode
// above all, while Redis cannot be reached: a failed refresh keeps the last
// configurations and marks Redis unreachable until one succeeds.
type ConfigCache struct {
	s     *Store
	every time.Duration

	mu        sync.RWMutex
	cfgs      map[string]queue.Config
	reachable bool
	at        time.Time
}

// NewConfigCache returns a cache over s refreshed every every (at most a
// second is what the fail mode needs); Run refreshes it.
func NewConfigCache(s *Store, every time.Duration) *ConfigCache {
	if every <= 0 || every > time.Second {
		every = time.Second
	}
	return &ConfigCache{s: s, every: every, cfgs: map[string]queue.Config{}}
}

// Run refreshes the cache until ctx ends.
func (c *ConfigCache) Run(ctx context.Context) error {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, c.every)
		_ = c.Refresh(rctx)
		cancel()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads every queue's configuration now. On failure the cache keeps
// what it had and reports Redis unreachable.
func (c *ConfigCache) Refresh(ctx context.Context) error {
	ids, err := c.s.rdb.SMembers(ctx, QueuesKey).Result()
	var cmds []*redis.MapStringStringCmd
	if err == nil {
		cmds = make([]*redis.MapStringStringCmd, len(ids))
		_, err = c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range ids {
				cmds[i] = p.HGetAll(ctx, KeysFor(q).Config())
			}
			return nil
		})
	}
	if err != nil {
		c.mu.Lock()
		c.reachable = false
		c.mu.Unlock()
		return classifyf("refresh queue configs", err)
	}
	cfgs := make(map[string]queue.Config, len(ids))
	for i, q := range ids {
		h := cmds[i].Val()
		if len(h) == 0 {
			continue // listed, not configured (being deleted)
		}
		if cfg, derr := decodeConfig(h); derr == nil {
			cfgs[q] = cfg
		}
	}
	c.mu.Lock()
	c.cfgs, c.reachable, c.at = cfgs, true, time.Now()
	c.mu.Unlock()
	return nil
}

// Get returns q's configuration as last read, and whether there is one.
func (c *ConfigCache) Get(q string) (queue.Config, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	cfg, ok := c.cfgs[q]
	return cfg, ok
}

// Reachable reports whether the last refresh reached Redis.
func (c *ConfigCache) Reachable() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.reachable
}
