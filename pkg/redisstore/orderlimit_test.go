package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// TestConsumeCarriesTheQueuesOrderLimit: consume answers the queue's
// maxOrdersPerUser as it is at that moment (0 when unset), on the first
// call and on the retry of the same order, so the order transaction
// enforces a knob changed a moment ago.
func TestConsumeCarriesTheQueuesOrderLimit(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, nil)
	ctx := context.Background()
	setLimit := func(n int64) {
		t.Helper()
		if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) { c.MaxOrdersPerUser = n; return c, nil }); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []struct {
		limit   int64
		set     bool
		wantMax int64
	}{{wantMax: 0}, {limit: 1, set: true, wantMax: 1}, {limit: 3, set: true, wantMax: 3}, {limit: 0, set: true, wantMax: 0}} {
		if c.set {
			setLimit(c.limit)
		}
		user, oid := "buyer"+string(rune('a'+i)), "order-"+string(rune('a'+i))
		grantToken(t, rdb, q, user, "sec", "tid-"+user, time.Minute)
		first, err := s.Consume(ctx, q, user, "sec", oid, time.Second, time.Second)
		if err != nil || first.MaxOrders != c.wantMax {
			t.Fatalf("case %d: consume = %+v, %v; want MaxOrders %d", i, first, err, c.wantMax)
		}
		again, err := s.Consume(ctx, q, user, "sec", oid, time.Second, time.Second)
		if err != nil || again.MaxOrders != c.wantMax || again.TokenID != first.TokenID {
			t.Fatalf("case %d: the retry of the same order = %+v, %v; want token %s and MaxOrders %d", i, again, err, first.TokenID, c.wantMax)
		}
	}
}
