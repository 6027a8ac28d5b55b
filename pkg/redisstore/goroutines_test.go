package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestNoGoroutineOutlivesTheStoreOrTheFrontierCache: the frontier cache's
// Run returns only once its subscription's reader has ended, and after
// Store.Wait none of the Store's background goroutines is left: here the
// replica counts read again in the background (the Store waits for one
// replica, which this single server lacks: every enter runs and is
// answered ErrNotReplicated, for 1.5 s, three times the counts' age) and
// the group-commit flushers. goleak sees nothing of either once the
// client is closed. Not parallel: goleak sees the whole binary.
func TestNoGoroutineOutlivesTheStoreOrTheFrontierCache(t *testing.T) {
	shared, _ := newStore(t) // makes and purges the queue, on a client closed at cleanup
	q := newQueue(t, shared, nil)
	before := goleak.IgnoreCurrent()
	rdb, err := redisstore.NewClient(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	s.RequireReplicas(1, 50*time.Millisecond)
	ctx := context.Background()
	if err := s.SyncClock(ctx); err != nil {
		t.Fatal(err)
	}
	cache := redisstore.NewFrontierCache(s, nil, redisstore.FrontierOptions{Every: 20 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- cache.Run(runCtx) }()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	until := time.Now().Add(1500 * time.Millisecond)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; i < 25 || time.Now().Before(until); i++ {
				if _, err := s.Enter(ctx, q, fmt.Sprintf("w%d-u%02d", w, i%25)); err != nil && !errors.Is(err, queue.ErrNotReplicated) {
					errs <- err
					return
				}
				cache.Lookup(q)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enter: %v", err)
	}
	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("frontier cache Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the frontier cache's Run did not return within 30 s of its context's end")
	}
	if n, err := rdb.ZCard(ctx, redisstore.KeysFor(q).Waiting()).Result(); err != nil || n != 200 {
		t.Fatalf("%d in line (%v), want 200", n, err)
	}
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
