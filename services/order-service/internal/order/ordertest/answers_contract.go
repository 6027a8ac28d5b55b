package ordertest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// RunAnswersContract states what PlaceOnce relies on from order.Answers: a
// key is claimed by one request, its finished answer is replayed, an
// unfinished claim can be abandoned and a finished one cannot, and keys
// are per user.
func RunAnswersContract(t *testing.T, newRepo NewRepoFunc) {
	runRepoCases(t, newRepo, []repoCase{
		{"AKeyIsClaimedOnce", claimedOnce},
		{"AFinishedAnswerIsReplayed", finishedReplayed},
		{"AbandonFreesAnUnfinishedClaim", abandonFrees},
		{"AbandonKeepsAFinishedAnswer", abandonKeeps},
		{"FinishWithoutAClaimStores", finishUnclaimed},
		{"KeysArePerUser", keysPerUser},
		{"ConcurrentClaimsHaveOneWinner", concurrentClaims},
	})
}

// answerIs checks one Begin or Lookup answer.
func answerIs(t *testing.T, what string, got order.StoredAnswer, flag bool, err error, want order.StoredAnswer, wantFlag bool) {
	t.Helper()
	if err != nil || flag != wantFlag || got.Done != want.Done || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("%s: %+v %v %v, want %+v %v", what, got, flag, err, want, wantFlag)
	}
}

var (
	running = order.StoredAnswer{}
	kept    = order.StoredAnswer{Status: 201, Body: []byte(`{"orderId":"o-1"}`), Done: true}
)

func claimedOnce(t *testing.T, r order.Repo) {
	ctx := context.Background()
	a, fresh, err := r.BeginIdempotent(ctx, "alice", "k")
	answerIs(t, "first begin", a, fresh, err, running, true)
	a, fresh, err = r.BeginIdempotent(ctx, "alice", "k")
	answerIs(t, "second begin", a, fresh, err, running, false)
	a, found, err := r.LookupIdempotent(ctx, "alice", "k")
	answerIs(t, "lookup of the claim", a, found, err, running, true)
	a, found, err = r.LookupIdempotent(ctx, "alice", "other")
	answerIs(t, "lookup of an unused key", a, found, err, running, false)
}

func finishedReplayed(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if _, fresh, err := r.BeginIdempotent(ctx, "alice", "k"); err != nil || !fresh {
		t.Fatalf("begin: %v %v", fresh, err)
	}
	if err := r.FinishIdempotent(ctx, "alice", "k", kept.Status, kept.Body); err != nil {
		t.Fatal(err)
	}
	a, fresh, err := r.BeginIdempotent(ctx, "alice", "k")
	answerIs(t, "begin after finish", a, fresh, err, kept, false)
	a, found, err := r.LookupIdempotent(ctx, "alice", "k")
	answerIs(t, "lookup after finish", a, found, err, kept, true)
}

func abandonFrees(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if _, fresh, err := r.BeginIdempotent(ctx, "alice", "k"); err != nil || !fresh {
		t.Fatalf("begin: %v %v", fresh, err)
	}
	if err := r.AbandonIdempotent(ctx, "alice", "k"); err != nil {
		t.Fatal(err)
	}
	a, found, err := r.LookupIdempotent(ctx, "alice", "k")
	answerIs(t, "lookup after abandon", a, found, err, running, false)
	a, fresh, err := r.BeginIdempotent(ctx, "alice", "k")
	answerIs(t, "begin after abandon", a, fresh, err, running, true)
}

func abandonKeeps(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if _, fresh, err := r.BeginIdempotent(ctx, "alice", "k"); err != nil || !fresh {
		t.Fatalf("begin: %v %v", fresh, err)
	}
	if err := r.FinishIdempotent(ctx, "alice", "k", kept.Status, kept.Body); err != nil {
		t.Fatal(err)
	}
	if err := r.AbandonIdempotent(ctx, "alice", "k"); err != nil {
		t.Fatal(err)
	}
	a, found, err := r.LookupIdempotent(ctx, "alice", "k")
	answerIs(t, "lookup after abandoning a finished key", a, found, err, kept, true)
}

func finishUnclaimed(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if err := r.FinishIdempotent(ctx, "alice", "k", kept.Status, kept.Body); err != nil {
		t.Fatal(err)
	}
	a, fresh, err := r.BeginIdempotent(ctx, "alice", "k")
	answerIs(t, "begin after an unclaimed finish", a, fresh, err, kept, false)
}

func keysPerUser(t *testing.T, r order.Repo) {
	ctx := context.Background()
	if err := r.FinishIdempotent(ctx, "alice", "k", kept.Status, kept.Body); err != nil {
		t.Fatal(err)
	}
	a, fresh, err := r.BeginIdempotent(ctx, "bob", "k")
	answerIs(t, "bob's begin of alice's key", a, fresh, err, running, true)
	a, found, err := r.LookupIdempotent(ctx, "alice", "k")
	answerIs(t, "alice's answer", a, found, err, kept, true)
}

func concurrentClaims(t *testing.T, r order.Repo) {
	ctx := context.Background()
	const n = 20
	fresh := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, fresh[i], errs[i] = r.BeginIdempotent(ctx, "alice", "k") })
	}
	wg.Wait()
	won := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("begin %d: %v", i, errs[i])
		}
		if fresh[i] {
			won++
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent begins claimed the key, want 1", won, n)
	}
}
