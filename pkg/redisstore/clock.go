package redisstore

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Requests that change state must not be applied after their caller gave
// up on them. go-redis resends a command whose reply did not come in time
// (MaxRetries), and a request held on the way (a slow link, a proxy, a
// failover) can reach Redis after that retry was answered and after the
// caller acted on the answer. Each script is safe to run twice with the
// same request id; these two fences make a late copy harmless too:
//
//   - a tick id only grows within the leader's epoch (nextTick), and the
//     issue script refuses a tick older than the last applied one;
//   - consume and the lease's acquire and renew carry a deadline in Redis
//     TIME (deadline): the caller's give-up time on Redis's clock, which
//     the script checks before anything else.

// nextTick is a fresh tick id: a decimal number larger than every one this
// Store made before. It starts at the Store's creation time in
// microseconds, so a leader's ids also grow across Stores made one after
// another, and stays below 2^53 (Lua numbers are doubles) for centuries.
func (s *Store) nextTick() string {
	return strconv.FormatInt(s.ticks.Add(1), 10)
}

// clockRefresh is how long one reading of Redis's clock is used: clocks
// drift by microseconds over it.
const clockRefresh = 30 * time.Second

// redisClock is this process's estimate of Redis's clock: the offset of
// Redis TIME from the local clock, read with one TIME command, and the
// uncertainty of the reading (half its round trip). A Store on a cluster
// reads one node's clock; the masters' own skew adds to the uncertainty
// (DESIGN, "The atomic operations").
//
// The request path never waits for a reading: Connect (SyncClock) takes
// the first one, and once a reading is older than clockRefresh a call that
// needs it starts one TIME command of its own in the background (one at a
// time, bounded by readClockTimeout) and goes on with the old reading. A
// Store with no reading yet sends no deadline.
type redisClock struct {
	mu      sync.Mutex
	offset  time.Duration
	slack   time.Duration
	read    time.Time // local time of the reading; zero: none yet
	reading atomic.Bool
	bg      *background // the Store's, which waits for a reading
}

// readClockTimeout bounds one background reading of Redis's clock.
const readClockTimeout = 2 * time.Second

// now is Redis's time as this process estimates it; ok is false when there
// is no reading yet.
func (c *redisClock) now(rdb redis.UniversalClient) (t time.Time, slack time.Duration, ok bool) {
	c.mu.Lock()
	read, offset, slack := c.read, c.offset, c.slack
	c.mu.Unlock()
	if read.IsZero() || time.Since(read) >= clockRefresh {
		if c.reading.CompareAndSwap(false, true) {
			started := c.bg.Go(func() {
				defer c.reading.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), readClockTimeout)
				defer cancel()
				_ = c.sync(ctx, rdb)
			})
			if !started {
				c.reading.Store(false)
			}
		}
	}
	if read.IsZero() {
		return time.Time{}, 0, false
	}
	return time.Now().Add(offset), slack, true
}

// sync reads Redis's clock now.
func (c *redisClock) sync(ctx context.Context, rdb redis.UniversalClient) error {
	sent := time.Now()
	rt, err := rdb.Time(ctx).Result()
	back := time.Now()
	if err != nil {
		return classifyf("read Redis's clock", err)
	}
	rtt := back.Sub(sent)
	c.mu.Lock()
	c.offset, c.slack, c.read = rt.Sub(sent.Add(rtt/2)), rtt/2, back
	c.mu.Unlock()
	return nil
}

// SyncClock reads Redis's clock (one TIME command) for the deadlines of the
// requests that must not land late; Connect calls it once, and the Store
// reads it again in the background every clockRefresh.
func (s *Store) SyncClock(ctx context.Context) error { return s.clock.sync(ctx, s.rdb) }

// deadline is the Redis TIME, in milliseconds, after which a request sent
// now must be refused: when this caller gives up on it (its context's
// deadline, or its client's read timeout for each try), plus the clock's
// uncertainty. 0 means none: no reading of Redis's clock yet (SyncClock).
func (s *Store) deadline(ctx context.Context) int64 {
	rnow, slack, ok := s.clock.now(s.rdb)
	if !ok {
		return 0
	}
	budget := s.giveUp
	if d, has := ctx.Deadline(); has {
		budget = min(budget, time.Until(d))
	}
	return rnow.Add(max(budget, 0) + slack).UnixMilli()
}

// giveUpAfter is how long a client built by NewClient (or any go-redis
// client) waits for one command with its retries: the read timeout for
// each try. A client without a read timeout gets a few seconds.
func giveUpAfter(rdb redis.UniversalClient) time.Duration {
	read, tries := time.Duration(0), 1
	switch c := rdb.(type) {
	case *redis.Client:
		read, tries = c.Options().ReadTimeout, c.Options().MaxRetries+1
	case *redis.ClusterClient:
		read, tries = c.Options().ReadTimeout, c.Options().MaxRetries+1
	}
	if read <= 0 {
		read = 3 * time.Second
	}
	if tries < 1 {
		tries = 1
	}
	return read * time.Duration(tries)
}
