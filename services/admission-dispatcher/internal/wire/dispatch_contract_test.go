package wire

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch/dispatchtest"
)

// redisstore passes the contract of dispatch.Store that dispatchtest's fake
// passes. Queues are made, entered and closed through redisstore's own
// UpdateConfig, Enter and Close, as the gateway does; time is Redis's.
func TestDispatchStoreContract(t *testing.T) {
	dispatchtest.RunStoreContract(t, func(t *testing.T) (dispatch.Store, dispatchtest.Harness) {
		store, err := redisstore.NewStore(testenv.Redis(t))
		if err != nil {
			t.Fatal(err)
		}
		return store, &redisHarness{store: store, purged: map[string]bool{}}
	})
}

type redisHarness struct {
	store  *redisstore.Store
	mu     sync.Mutex
	purged map[string]bool
}

func (h *redisHarness) Configure(t *testing.T, q string, c queue.Config) {
	t.Helper()
	h.mu.Lock()
	if !h.purged[q] {
		h.purged[q] = true
		t.Cleanup(func() { _ = h.store.Purge(context.Background(), q) })
	}
	h.mu.Unlock()
	_, _, err := h.store.UpdateConfig(context.Background(), q, func(queue.Config, bool) (queue.Config, error) { return c, nil })
	if err != nil {
		t.Fatalf("configure %s: %v", q, err)
	}
}

func (h *redisHarness) Enter(t *testing.T, q, user string) {
	t.Helper()
	if _, err := h.store.Enter(context.Background(), q, user); err != nil {
		t.Fatalf("enter %s: %v", q, err)
	}
}

func (h *redisHarness) Close(t *testing.T, q string) {
	t.Helper()
	if _, err := h.store.Close(context.Background(), q); err != nil {
		t.Fatalf("close %s: %v", q, err)
	}
}

func (h *redisHarness) LoseLineCopy(t *testing.T, q string, line int) {
	t.Helper()
	k, err := h.store.LineKeys(context.Background(), q, line)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Client().Del(context.Background(), k.Config()).Err(); err != nil {
		t.Fatalf("delete line %d's config of %s: %v", line, q, err)
	}
}

func (h *redisHarness) Now(t *testing.T) time.Time {
	t.Helper()
	now, err := h.store.Client().Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("Redis TIME: %v", err)
	}
	return now
}

func (h *redisHarness) Wait(_ *testing.T, d time.Duration) { time.Sleep(d) }
