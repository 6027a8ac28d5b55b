package redisstore_test

import (
	"context"
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
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Refresh(rctx); err == nil || c.Reachable() {
		t.Fatalf("refresh with Redis down: %v, reachable %v", err, c.Reachable())
	}
	if cfg, ok := c.Get("open-q"); !ok || cfg.FailMode != queue.FailOpen || cfg.AdmissionRatePerSec != 175 {
		t.Errorf("with Redis down the cache answers %+v %v, want the last config", cfg, ok)
	}

	srv.Start()
	set("open-q", queue.FailClosed)
	if err := c.Refresh(ctx); err != nil || !c.Reachable() {
		t.Fatalf("refresh after Redis is back: %v", err)
	}
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
