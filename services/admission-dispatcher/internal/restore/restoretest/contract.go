package restoretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
)

// NewStoreFunc makes an empty store for one test, with its Seeder.
type NewStoreFunc func(t *testing.T) (restore.Store, Seeder)

// RunStoreContract states what restoration relies on from restore.Store:
// the attempt in flight is restored (its token back, unless it expired
// meanwhile) or freed (not restorable) exactly once, however often its
// OrderFailed is delivered, and anything else is a duplicate that changes
// nothing. Every case starts from an empty store and runs in parallel.
func RunStoreContract(t *testing.T, newStore NewStoreFunc) {
	queuetest.RunContract(t, newStore, []queuetest.Case[restore.Store, Seeder]{
		{Name: "RestorableFailureGivesTheTokenBackOnce", Run: restoredOnce},
		{Name: "NotRestorableFailureFreesTheSlot", Run: freed},
		{Name: "ExpiredTokenIsNotGivenBack", Run: expired},
		{Name: "AnythingButTheAttemptInFlightIsADuplicate", Run: duplicates},
		{Name: "LateRedeliveryAfterTheTokenWasReusedChangesNothing", Run: lateRedelivery},
		{Name: "ConcurrentRedeliveriesRestoreOnce", Run: concurrentRestores},
	})
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// consumed issues user a token in q and consumes it for orderID.
func consumed(t *testing.T, seed Seeder, q, user, orderID string, ttl time.Duration) Token {
	t.Helper()
	tok := Token{Secret: randomHex(t, 16), ID: "tok-" + user, TTL: ttl}
	seed.Issue(t, q, user, tok)
	if id, err := seed.Consume(t, q, user, tok.Secret, orderID); err != nil || id != tok.ID {
		t.Fatalf("consume %s's token for %s: %q %v, want %s", user, orderID, id, err, tok.ID)
	}
	return tok
}

// restores runs the steps in order, each a Restore and its outcome.
func restores(t *testing.T, s restore.Store, q, user string, steps []step) {
	t.Helper()
	for _, st := range steps {
		got, err := s.Restore(context.Background(), q, user, st.tokenID, st.orderID, st.restorable)
		if err != nil || got != st.want {
			t.Fatalf("%s: %q %v, want %s", st.name, got, err, st.want)
		}
	}
}

type step struct {
	name             string
	tokenID, orderID string
	restorable       bool
	want             queue.RestoreOutcome
}

func restoredOnce(t *testing.T, s restore.Store, seed Seeder) {
	q := queuetest.ID(t)
	tok := consumed(t, seed, q, "alice", "order-1", time.Minute)
	steps := []step{{"the failure", tok.ID, "order-1", true, queue.Restored}}
	for range 4 {
		steps = append(steps, step{"a redelivery", tok.ID, "order-1", true, queue.Duplicate})
	}
	restores(t, s, q, "alice", steps)
	// The token is back, with its secret: a new attempt can take it.
	if id, err := seed.Consume(t, q, "alice", tok.Secret, "order-2"); err != nil || id != tok.ID {
		t.Fatalf("consume the restored token: %q %v, want %s", id, err, tok.ID)
	}
}

func freed(t *testing.T, s restore.Store, seed Seeder) {
	q := queuetest.ID(t)
	tok := consumed(t, seed, q, "alice", "order-1", time.Minute)
	restores(t, s, q, "alice", []step{
		{"a sold-out failure", tok.ID, "order-1", false, queue.Freed},
		{"its redelivery", tok.ID, "order-1", false, queue.Duplicate},
		{"a restorable redelivery after it", tok.ID, "order-1", true, queue.Duplicate},
	})
	if _, err := seed.Consume(t, q, "alice", tok.Secret, "order-2"); !errors.Is(err, queue.ErrInvalidToken) {
		t.Fatalf("consume after the slot was freed: %v, want ErrInvalidToken", err)
	}
}

func expired(t *testing.T, s restore.Store, seed Seeder) {
	q := queuetest.ID(t)
	tok := consumed(t, seed, q, "alice", "order-1", 150*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	restores(t, s, q, "alice", []step{
		{"a failure after the token's expiry", tok.ID, "order-1", true, queue.RestoreExpired},
		{"its redelivery", tok.ID, "order-1", true, queue.Duplicate},
	})
	if _, err := seed.Consume(t, q, "alice", tok.Secret, "order-2"); !errors.Is(err, queue.ErrInvalidToken) {
		t.Fatalf("consume after an expired restore: %v, want ErrInvalidToken", err)
	}
}

func duplicates(t *testing.T, s restore.Store, seed Seeder) {
	ctx := context.Background()
	q := queuetest.ID(t)
	if got, err := s.Restore(ctx, q, "bob", "tok-bob", "order-1", true); err != nil || got != queue.Duplicate {
		t.Fatalf("a user with nothing consumed: %q %v, want DUPLICATE", got, err)
	}
	tok := consumed(t, seed, q, "alice", "order-1", time.Minute)
	for _, tc := range []struct{ name, q, user, tokenID, orderID string }{
		{"another attempt's order id", q, "alice", tok.ID, "order-2"},
		{"another token id", q, "alice", "tok-other", "order-1"},
		{"another user", q, "bob", tok.ID, "order-1"},
		{"another queue", queuetest.ID(t), "alice", tok.ID, "order-1"},
	} {
		for _, restorable := range []bool{true, false} {
			if got, err := s.Restore(ctx, tc.q, tc.user, tc.tokenID, tc.orderID, restorable); err != nil || got != queue.Duplicate {
				t.Fatalf("%s (restorable %v): %q %v, want DUPLICATE", tc.name, restorable, got, err)
			}
		}
	}
	// None of them touched the attempt in flight.
	restores(t, s, q, "alice", []step{{"the attempt itself", tok.ID, "order-1", true, queue.Restored}})
}

func lateRedelivery(t *testing.T, s restore.Store, seed Seeder) {
	q := queuetest.ID(t)
	tok := consumed(t, seed, q, "alice", "order-1", time.Minute)
	restores(t, s, q, "alice", []step{{"the first attempt's failure", tok.ID, "order-1", true, queue.Restored}})
	if _, err := seed.Consume(t, q, "alice", tok.Secret, "order-2"); err != nil {
		t.Fatalf("consume the restored token: %v", err)
	}
	restores(t, s, q, "alice", []step{
		{"the first failure again, late", tok.ID, "order-1", true, queue.Duplicate},
		{"the second attempt's sold-out failure", tok.ID, "order-2", false, queue.Freed},
	})
}

func concurrentRestores(t *testing.T, s restore.Store, seed Seeder) {
	q := queuetest.ID(t)
	tok := consumed(t, seed, q, "alice", "order-1", time.Minute)
	const n = 10
	outs := make([]queue.RestoreOutcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { outs[i], errs[i] = s.Restore(context.Background(), q, "alice", tok.ID, "order-1", true) })
	}
	wg.Wait()
	count := map[queue.RestoreOutcome]int{}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("restore %d: %v", i, errs[i])
		}
		count[outs[i]]++
	}
	if count[queue.Restored] != 1 || count[queue.Duplicate] != n-1 {
		t.Fatalf("outcomes %v, want 1 RESTORED and %d DUPLICATE", count, n-1)
	}
}
