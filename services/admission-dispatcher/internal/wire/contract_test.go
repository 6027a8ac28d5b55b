package wire

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore/restoretest"
)

// redisstore passes the contract of restore.Store that restoretest's fake
// passes. Tokens are issued as lua/issue.lua writes them and consumed
// through the order path's own Consume.
func TestRestoreStoreContract(t *testing.T) {
	restoretest.RunStoreContract(t, func(t *testing.T) (restore.Store, restoretest.Seeder) {
		rdb := testenv.Redis(t)
		store, err := redisstore.NewStore(rdb)
		if err != nil {
			t.Fatal(err)
		}
		return store, &redisSeeder{store: store, purged: map[string]bool{}}
	})
}

type redisSeeder struct {
	store  *redisstore.Store
	mu     sync.Mutex
	purged map[string]bool
}

func (s *redisSeeder) Issue(t *testing.T, q, user string, tok restoretest.Token) {
	t.Helper()
	ctx := context.Background()
	s.mu.Lock()
	if !s.purged[q] {
		s.purged[q] = true
		t.Cleanup(func() { _ = s.store.Purge(context.Background(), q) })
	}
	s.mu.Unlock()
	rdb := s.store.Client()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	expires := now.Add(tok.TTL)
	k := redisstore.KeysFor(q)
	marker := redisstore.TokenMarker(queue.Token{Secret: tok.Secret, ID: tok.ID, ActivateAt: now, ExpiresAt: expires}, 1)
	if err = rdb.Set(ctx, k.Status(user), marker, tok.TTL+2*time.Minute).Err(); err != nil {
		t.Fatalf("issue %s's token in %s: %v", user, q, err)
	}
}

func (s *redisSeeder) Consume(_ *testing.T, q, user, secret, orderID string) (string, error) {
	c, err := s.store.Consume(context.Background(), q, user, secret, orderID, 30*time.Second, time.Minute)
	return c.TokenID, err
}
