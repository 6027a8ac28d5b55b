package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestConfigCacheOutlivesARedisOutage: the cache reads every listed queue's
// configuration; with Redis (a private server) killed, a refresh fails, the
// cache says unreachable and still answers the last configurations (the
// fail mode above all); when Redis is back (empty: it keeps nothing), the
// next refresh says reachable and reflects what is there now.
func TestConfigCacheOutlivesARedisOutage(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	s := testenv.StoreAt(t, srv.URL())
	ctx := context.Background()
	set := func(q string, m queue.FailMode) {
		t.Helper()
		if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
			c.FailMode = m
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	set("open-q", queue.FailOpen)
	set("closed-q", queue.FailClosed)
	c := redisstore.NewConfigCache(s, time.Second)
	if err := c.Refresh(ctx); err != nil || !c.Reachable() {
		t.Fatalf("first refresh: %v, reachable %v", err, c.Reachable())
	}
	if !bypasses(c, "open-q") || bypasses(c, "closed-q") || bypasses(c, "unknown") {
		t.Fatalf("fails open: open-q %v closed-q %v unknown %v", bypasses(c, "open-q"), bypasses(c, "closed-q"), bypasses(c, "unknown"))
	}

	srv.Stop()
	// Down only after OutageProbes failures in a row over OutageWindow:
	// one failed refresh is a blip.
	stopped := time.Now()
	failures := 0
	for c.Reachable() {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Refresh(rctx)
		cancel()
		if err == nil {
			t.Fatal("a refresh with Redis stopped succeeded")
		}
		failures++
		if failures > 10 {
			t.Fatalf("still reachable after %d failed refreshes over %v", failures, time.Since(stopped))
		}
		if c.Reachable() {
			time.Sleep(400 * time.Millisecond)
		}
	}
	if took := time.Since(stopped); failures < redisstore.OutageProbes || took < redisstore.OutageWindow {
		t.Fatalf("down after %d failed refreshes over %v, want at least %d over %v", failures, took, redisstore.OutageProbes, redisstore.OutageWindow)
	}
	if cfg, ok := c.Get("open-q"); !ok || cfg.FailMode != queue.FailOpen || cfg.AdmissionRatePerSec != 175 {
		t.Errorf("with Redis down the cache answers %+v %v, want the last config", cfg, ok)
	}

	srv.Start()
	set("open-q", queue.FailClosed)
	// The probe's small pool redials about once a second after failed
	// dials (go-redis), so the first refresh after may fail still.
	testenv.WaitFor(t, 5*time.Second, "a refresh after Redis is back", func() bool {
		return c.Refresh(ctx) == nil && c.Reachable()
	})
	if bypasses(c, "open-q") {
		t.Error("the cache still says open-q fails OPEN after it was changed")
	}
	if _, ok := c.Get("closed-q"); ok {
		t.Error("closed-q, gone with the restarted Redis, is still cached")
	}
}

// bypasses is what every service asks of its cache: q's config as last
// read, and whether it lets orders through while Redis is away.
func bypasses(c *redisstore.ConfigCache, q string) bool {
	cfg, ok := c.Get(q)
	return ok && cfg.Bypasses(time.Now())
}

// The cache's refreshes are the replica's probe of Redis, on connections of
// their own: a Store whose only connection is held (a pool used up by the
// replica's own load) does not make them fail, so Redis is never taken for
// down because of it.
func TestConfigCacheProbesOnItsOwnConnections(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	s := testenv.StoreAt(t, srv.URL()+"?pool_size=1&pool_timeout=50ms")
	ctx := context.Background()
	if _, _, err := s.UpdateConfig(ctx, "open-q", func(c queue.Config, _ bool) (queue.Config, error) {
		c.FailMode = queue.FailOpen
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	c := redisstore.NewConfigCache(s, time.Second)
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(held)
		done <- s.Client().BLPop(ctx, 3*time.Second, "nothing-comes").Err()
	}()
	<-held
	time.Sleep(100 * time.Millisecond)
	if err := s.Client().Ping(ctx).Err(); err == nil {
		t.Fatal("the store's one connection is not held: the premise failed")
	}
	for i := range redisstore.OutageProbes + 1 {
		if err := c.Refresh(ctx); err != nil || !c.Reachable() {
			t.Fatalf("refresh %d with the store's pool used up: %v, reachable %v", i+1, err, c.Reachable())
		}
	}
	if _, ok := c.Get("open-q"); !ok {
		t.Fatal("open-q not cached")
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "nil") {
		t.Logf("the held BLPOP ended with %v", err)
	}
}
