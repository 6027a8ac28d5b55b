package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

const startRedis = `redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no`

var redisContainer = container{server: "redis"}

// DefaultTestRedisURL is where tests look for Redis unless REDIS_URL says
// otherwise: database 15 of the local server, so a `make run` stack on
// database 0 (whose dispatcher serves every queue it finds) never picks up a
// test's queues, and tests never see the demo's.
const DefaultTestRedisURL = "redis://127.0.0.1:6379/15"

// RedisURL returns the URL of a Redis that answers, or fails the test.
func RedisURL(t testing.TB) string {
	t.Helper()
	url := getenv("REDIS_URL", DefaultTestRedisURL)
	err := pingRedis(url)
	if err == nil {
		return url
	}
	addr, derr := redisContainer.start()
	if derr == nil {
		return "redis://" + addr + "/0"
	}
	t.Fatalf("Redis is not reachable at REDIS_URL=%s: %v\n"+
		"Start one with:  %s\n"+
		"or point REDIS_URL at one (with a Docker engine the tests start a container; here: %v)", url, err, startRedis, derr)
	return ""
}

// Redis returns a client of a Redis that answers, closed when the test ends.
func Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	c, err := redisstore.NewClient(RedisURL(t))
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func pingRedis(url string) error {
	c, err := redisstore.NewClient(url)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}
