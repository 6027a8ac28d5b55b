package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// PurgeAtCleanup deletes the queues (their keys and their wr:queues entry)
// from the Redis at url when the test ends. Register it before starting
// the services that use the queues: cleanups run last-in first-out, so the
// purge runs after they stopped and nothing writes the keys back. A Redis
// that is gone by then (a test's private server) is not an error.
func PurgeAtCleanup(t testing.TB, url string, queues ...string) {
	t.Helper()
	t.Cleanup(func() {
		rdb, err := redisstore.NewClient(url)
		if err != nil {
			return
		}
		defer rdb.Close()
		store, err := redisstore.NewStore(rdb)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, q := range queues {
			_ = store.Purge(ctx, q)
		}
	})
}
