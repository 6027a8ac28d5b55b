package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// A call that finds every connection of the pool busy is the process's
// overload, not Redis down: queue.ErrOverloaded, which is still an
// ErrUnavailable (503 everywhere), while a Redis that does not answer is
// ErrUnavailable alone.
func TestPoolTimeoutIsOverload(t *testing.T) {
	t.Parallel()
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opt.PoolSize, opt.PoolTimeout = 1, 50*time.Millisecond
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := redisstore.NewRateLimiter(rdb, "overload:"+testenv.ID(t)+":", 10)
	if err != nil {
		t.Fatal(err)
	}
	// The pool's one connection waits in a BLPOP for a second.
	var wg sync.WaitGroup
	held := make(chan struct{})
	wg.Go(func() {
		close(held)
		rdb.BLPop(context.Background(), time.Second, "overload:"+testenv.ID(t)+":never")
	})
	t.Cleanup(wg.Wait)
	<-held
	time.Sleep(100 * time.Millisecond)
	_, _, err = lim.Allow(context.Background(), "someone")
	if !errors.Is(err, queue.ErrOverloaded) || !errors.Is(err, queue.ErrUnavailable) {
		t.Fatalf("with the pool's only connection busy: %v; want ErrOverloaded, an ErrUnavailable", err)
	}

	// Nobody listening: unavailable, and not overload.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	downLim, _ := redisstore.NewRateLimiter(down, "overload:", 10)
	_, _, err = downLim.Allow(context.Background(), "someone")
	if !errors.Is(err, queue.ErrUnavailable) || errors.Is(err, queue.ErrOverloaded) {
		t.Fatalf("with Redis unreachable: %v; want ErrUnavailable and not ErrOverloaded", err)
	}
}
