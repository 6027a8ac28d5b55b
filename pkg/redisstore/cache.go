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
// configurations.
//
// Its refreshes are also this replica's health probe of Redis, the one
// that decides whether Redis is down (Reachable): they run on a client of
// their own (two connections, outside the pool the requests share), so a
// pool exhausted by this replica's own load, or one request's slow reply,
// is never taken for an outage; and Redis counts as down only once
// OutageProbes refreshes in a row have failed over at least OutageWindow.
// One success ends the outage.
type ConfigCache struct {
	s     *Store
	own   func() error // closes the probe's own client; nil: s's
	every time.Duration

	mu        sync.RWMutex
	cfgs      map[string]queue.Config
	reachable bool
	at        time.Time
	// failures counts the refreshes failed in a row, the first of them at
	// failingSince.
	failures     int
	failingSince time.Time
}

// An outage is this many failed refreshes in a row spanning at least
// OutageWindow: with the 1 s refresh and its 1 s timeout, Redis is taken
// for down 2 to 3 s after it stopped answering.
const (
	OutageProbes = 3
	OutageWindow = 2 * time.Second
)

// NewConfigCache returns a cache over s refreshed every every (at most a
// second is what the fail mode needs); Run refreshes it, on a client of its
// own with s's options when s's client allows (a single node, Sentinel or
// a cluster), until Run returns.
func NewConfigCache(s *Store, every time.Duration) *ConfigCache {
	if every <= 0 || every > time.Second {
		every = time.Second
	}
	c := &ConfigCache{s: s, every: every, cfgs: map[string]queue.Config{}}
	if own, closeOwn := s.probeClient(); own != nil {
		c.s, c.own = own, closeOwn
	}
	return c
}

// probeClient is a Store over a new client with this Store's options but a
// pool of two connections, and the func that closes it; nil for a client
// whose options cannot be copied.
func (s *Store) probeClient() (*Store, func() error) {
	var rdb redis.UniversalClient
	switch c := s.rdb.(type) {
	case *redis.Client:
		o := *c.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = 2, 0, 2
		rdb = redis.NewClient(&o)
	case *redis.ClusterClient:
		o := *c.Options()
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns = 2, 0, 2
		rdb = redis.NewClusterClient(&o)
	default:
		return nil, nil
	}
	own, _ := NewStore(rdb)
	return own, rdb.Close
}

// Run refreshes the cache until ctx ends.
func (c *ConfigCache) Run(ctx context.Context) error {
	if c.own != nil {
		defer func() { _ = c.own() }()
	}
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
		if c.failures == 0 {
			c.failingSince = time.Now()
		}
		c.failures++
		if c.failures >= OutageProbes && time.Since(c.failingSince) >= OutageWindow {
			c.reachable = false
		}
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
	c.cfgs, c.reachable, c.at, c.failures = cfgs, true, time.Now(), 0
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

// Reachable reports whether Redis is up as this replica's probe sees it:
// false only during an outage (OutageProbes failed refreshes in a row over
// OutageWindow, none since), and before the first refresh.
func (c *ConfigCache) Reachable() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.reachable
}
