package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestNoGoroutineOutlivesTheStoreOrTheFrontierCache: the frontier cache's
// Run returns only once its subscription's reader has ended, and after
// Store.Wait none of the Store's background goroutines (clock readings,
// replica counts, group-commit flushers handing over) is left; goleak sees
// nothing of either once the client is closed. Not parallel: goleak sees
// the whole binary.
func TestNoGoroutineOutlivesTheStoreOrTheFrontierCache(t *testing.T) {
	before := goleak.IgnoreCurrent()
	rdb, err := redisstore.NewClient(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.SyncClock(ctx); err != nil {
		t.Fatal(err)
	}
	q := newQueue(t, s, nil)
	cache := redisstore.NewFrontierCache(s, nil, redisstore.FrontierOptions{Every: 20 * time.Millisecond})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- cache.Run(runCtx) }()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := s.Enter(ctx, q, fmt.Sprintf("w%d-u%02d", w, i)); err != nil {
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
