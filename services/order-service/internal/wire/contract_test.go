package wire

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// redisstore passes the contract of order.Tokens that ordertest's fake
// passes. Tokens are seeded as the admission-dispatcher's issue script
// writes them (lua/issue.lua): the TOKEN_ISSUED status marker, which holds
// the token, living two minutes past its expiry.
func TestTokensContract(t *testing.T) {
	ordertest.RunTokensContract(t, func(t *testing.T) (order.Tokens, ordertest.Issuer) {
		rdb := testenv.Redis(t)
		store, err := redisstore.NewStore(rdb)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		purged := map[string]bool{}
		issue := func(t *testing.T, q, user string, tok ordertest.Token) {
			t.Helper()
			ctx := context.Background()
			mu.Lock()
			if !purged[q] {
				purged[q] = true
				t.Cleanup(func() { _ = store.Purge(context.Background(), q) })
			}
			mu.Unlock()
			now, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatalf("issue: %v", err)
			}
			activate := now.Add(tok.ActivateIn)
			expires := activate.Add(tok.TTL)
			k := redisstore.KeysFor(q)
			marker := redisstore.TokenMarker(queue.Token{Secret: tok.Secret, ID: tok.ID, ActivateAt: activate, ExpiresAt: expires}, 1)
			err = rdb.Set(ctx, k.Status(user), marker, expires.Add(2*time.Minute).Sub(now)).Err()
			if err == nil && tok.QueueOrderLimit != 0 {
				_, _, err = store.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
					c.MaxOrdersPerUser = tok.QueueOrderLimit
					return c, nil
				})
			}
			if err != nil {
				t.Fatalf("issue %s's token in %s: %v", user, q, err)
			}
		}
		return store, issue
	})
}
