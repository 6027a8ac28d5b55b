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

// Stream entry ids order by milliseconds, then sequence, as numbers.
func TestStreamIDLessOrdersAsRedisDoes(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"9-0", "10-0", true},
		{"10-0", "9-0", false},
		{"10-2", "10-10", true},
		{"10-10", "10-2", false},
		{"10-1", "10-1", false},
		{"1764000000000-0", "1764000000001-0", true},
	} {
		if got := redisstore.StreamIDLess(c.a, c.b); got != c.want {
			t.Errorf("%s < %s: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
