package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// What Redis answers is sorted into "Redis cannot serve us now" (503 at
// the edges) and a bug (500), with the real server's error replies: a
// refused login, directly or from every sentinel, is an outage to the
// callers; a script's own error is not.
func TestClassifySortsRefusalsFromBugs(t *testing.T) {
	_, rdb := newStore(t)
	ctx := context.Background()
	wrongpass := rdb.Do(ctx, "AUTH", "nobody-such", "wrong").Err()
	bug := rdb.Eval(ctx, "return redis.call('nosuchcommand')", nil).Err()
	var rerr redis.Error
	if !errors.As(wrongpass, &rerr) || !errors.As(bug, &rerr) {
		t.Fatalf("want Redis error replies, got %v and %v", wrongpass, bug)
	}
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"a refused login", wrongpass, true},
		{"every sentinel refusing the login", fmt.Errorf("redis: all sentinels specified in configuration are unreachable: %w", errors.Join(wrongpass, wrongpass)), true},
		{"every sentinel out of reach", errors.New("redis: all sentinels specified in configuration are unreachable"), true},
		{"a script's error", bug, false},
	} {
		got := redisstore.Classify(tc.err)
		if errors.Is(got, queue.ErrUnavailable) != tc.unavailable {
			t.Errorf("%s: classify(%v) = %v; unavailable want %v", tc.name, tc.err, got, tc.unavailable)
		}
	}
}
