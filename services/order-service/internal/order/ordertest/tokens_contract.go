package ordertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/queue/queuetest"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// NewTokensFunc makes an empty order.Tokens for one test, with the Issuer
// that seeds it.
type NewTokensFunc func(t *testing.T) (order.Tokens, Issuer)

// RunTokensContract states what the order path relies on from its entry
// token store: the cheap check sorts secrets as consume will treat them,
// consume takes a token exactly once, settle answers true once per
// attempt, and the reaper's work list holds exactly the leases that ended.
// Every case starts from an empty store and runs in parallel with the
// others; times are the store's own clock, which the cases only bound.
func RunTokensContract(t *testing.T, newTokens NewTokensFunc) {
	queuetest.RunContract(t, newTokens, []queuetest.Case[order.Tokens, Issuer]{
		{Name: "CheckSortsPresentedSecrets", Run: checkSortsSecrets},
		{Name: "ConsumeTakesATokenOnce", Run: consumeTakesOnce},
		{Name: "ConsumeRepeatedByItsCallerAnswersAlike", Run: consumeRepeated},
		{Name: "ConsumeCarriesTheQueuesOrderLimit", Run: consumeCarriesOrderLimit},
		{Name: "ConsumeRefusesOtherSecretsUsersAndQueues", Run: consumeRefuses},
		{Name: "TokenNotActiveYetIsNotConsumed", Run: notActiveYet},
		{Name: "ExpiredTokenIsInvalid", Run: expiredToken},
		{Name: "ConcurrentConsumesHaveOneWinner", Run: concurrentConsumes},
		{Name: "SettleAnswersTrueOncePerAttempt", Run: settleOnce},
		{Name: "OverdueListsOnlyEndedLeases", Run: overdueEndedOnly},
		{Name: "OverdueIsEarliestFirstAndBounded", Run: overdueOrderAndLimit},
	})
}

// secret is a fresh 32-hex-character secret, as real tokens have.
func secret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func newToken(t *testing.T, id string) Token {
	return Token{Secret: secret(t), ID: id, TTL: time.Minute}
}

const (
	longLease = 30 * time.Second
	grace     = time.Minute
)

func mustConsume(t *testing.T, tokens order.Tokens, q, user, secret, orderID string, lease time.Duration) queue.Consumed {
	t.Helper()
	c, err := tokens.Consume(context.Background(), q, user, secret, orderID, lease, grace)
	if err != nil {
		t.Fatalf("consume %s's token for %s: %v", user, orderID, err)
	}
	return c
}

func checkSortsSecrets(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q, other := queuetest.ID(t), queuetest.ID(t)
	alice, early, spent := newToken(t, "tok-alice"), newToken(t, "tok-early"), newToken(t, "tok-spent")
	early.ActivateIn = 30 * time.Second
	issue(t, q, "alice", alice)
	issue(t, q, "bob", early)
	issue(t, q, "carol", spent)
	mustConsume(t, tokens, q, "carol", spent.Secret, "order-carol", longLease)
	for _, tc := range []struct {
		name, q, user, secret string
		want                  queue.TokenCheckState
	}{
		{"the user's active token", q, "alice", alice.Secret, queue.TokenValid},
		{"a wrong secret", q, "alice", secret(t), queue.TokenInvalid},
		{"no secret", q, "alice", "", queue.TokenInvalid},
		{"another user's secret", q, "dave", alice.Secret, queue.TokenInvalid},
		{"the secret in another queue", other, "alice", alice.Secret, queue.TokenInvalid},
		{"a token that activates later", q, "bob", early.Secret, queue.TokenNotActive},
		{"the token the user consumed", q, "carol", spent.Secret, queue.TokenSpent},
		{"a wrong secret of a user who consumed one", q, "carol", secret(t), queue.TokenInvalid},
		{"a consumed secret under another user", q, "alice", spent.Secret, queue.TokenInvalid},
	} {
		got, err := tokens.CheckToken(ctx, tc.q, tc.user, tc.secret)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.State != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got.State, tc.want)
		}
		// Only a token not active yet says how long to wait: up to its
		// 30 s, less what passed since it was issued.
		switch {
		case tc.want == queue.TokenNotActive && (got.Wait <= 25*time.Second || got.Wait > 30*time.Second):
			t.Errorf("%s: wait %v, want (25s, 30s]", tc.name, got.Wait)
		case tc.want != queue.TokenNotActive && got.Wait != 0:
			t.Errorf("%s: wait %v, want 0", tc.name, got.Wait)
		}
	}
}

func consumeTakesOnce(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	before := time.Now().Truncate(time.Millisecond)
	issue(t, q, "alice", tok)
	after := time.Now()
	c := mustConsume(t, tokens, q, "alice", tok.Secret, "order-1", longLease)
	if c.TokenID != tok.ID || c.ExpiresAt.Sub(c.ActivateAt) != tok.TTL || c.ActivateAt.Before(before) || c.ActivateAt.After(after) {
		t.Fatalf("consumed %+v, want %s active from issue (%v to %v) for %v", c, tok.ID, before, after, tok.TTL)
	}
	if _, err := tokens.Consume(ctx, q, "alice", tok.Secret, "order-2", longLease, grace); !errors.Is(err, queue.ErrInvalidToken) {
		t.Fatalf("second consume for another order: %v, want ErrInvalidToken", err)
	}
	if chk, err := tokens.CheckToken(ctx, q, "alice", tok.Secret); err != nil || chk.State != queue.TokenSpent {
		t.Fatalf("check after consume: %+v %v, want SPENT", chk, err)
	}
}

func consumeRepeated(t *testing.T, tokens order.Tokens, issue Issuer) {
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	issue(t, q, "alice", tok)
	first := mustConsume(t, tokens, q, "alice", tok.Secret, "order-1", longLease)
	again := mustConsume(t, tokens, q, "alice", tok.Secret, "order-1", longLease)
	if again != first {
		t.Fatalf("repeat answered %+v, the first call %+v", again, first)
	}
}

// consumeCarriesOrderLimit: consume answers the queue's maxOrdersPerUser
// (0 where it is not set), on the first call and on its repeat.
func consumeCarriesOrderLimit(t *testing.T, tokens order.Tokens, issue Issuer) {
	limited, open := queuetest.ID(t), queuetest.ID(t)
	tok := newToken(t, "tok-1")
	tok.QueueOrderLimit = 2
	issue(t, limited, "alice", tok)
	other := newToken(t, "tok-2")
	issue(t, open, "alice", other)
	for _, c := range []struct {
		q, secret string
		want      int64
	}{{limited, tok.Secret, 2}, {open, other.Secret, 0}} {
		first := mustConsume(t, tokens, c.q, "alice", c.secret, "order-1", longLease)
		again := mustConsume(t, tokens, c.q, "alice", c.secret, "order-1", longLease)
		if first.MaxOrders != c.want || again.MaxOrders != c.want {
			t.Errorf("queue %s: MaxOrders %d, then %d on the repeat; want %d", c.q, first.MaxOrders, again.MaxOrders, c.want)
		}
	}
}

func consumeRefuses(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	issue(t, q, "alice", tok)
	for _, tc := range []struct{ name, q, user, secret string }{
		{"a wrong secret", q, "alice", secret(t)},
		{"no secret", q, "alice", ""},
		{"another user", q, "bob", tok.Secret},
		{"another queue", queuetest.ID(t), "alice", tok.Secret},
	} {
		if _, err := tokens.Consume(ctx, tc.q, tc.user, tc.secret, "order-x", longLease, grace); !errors.Is(err, queue.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", tc.name, err)
		}
	}
	// None of them took it.
	if c := mustConsume(t, tokens, q, "alice", tok.Secret, "order-1", longLease); c.TokenID != tok.ID {
		t.Fatalf("consumed %+v, want %s", c, tok.ID)
	}
}

func notActiveYet(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	tok.ActivateIn = 3 * time.Second
	issue(t, q, "alice", tok)
	_, err := tokens.Consume(ctx, q, "alice", tok.Secret, "order-1", longLease, grace)
	var na *queue.NotActiveError
	if !errors.As(err, &na) || na.Wait <= 0 || na.Wait > 3*time.Second {
		t.Fatalf("consume before activation: %v, want a NotActiveError with a wait in (0, 3s]", err)
	}
	if chk, err := tokens.CheckToken(ctx, q, "alice", tok.Secret); err != nil || chk.State != queue.TokenNotActive {
		t.Fatalf("check after the refused consume: %+v %v, want the token still NOT_ACTIVE", chk, err)
	}
}

func expiredToken(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	tok.TTL = 100 * time.Millisecond
	issue(t, q, "alice", tok)
	time.Sleep(250 * time.Millisecond)
	if chk, err := tokens.CheckToken(ctx, q, "alice", tok.Secret); err != nil || chk.State != queue.TokenInvalid {
		t.Fatalf("check of an expired token: %+v %v, want INVALID", chk, err)
	}
	if _, err := tokens.Consume(ctx, q, "alice", tok.Secret, "order-1", longLease, grace); !errors.Is(err, queue.ErrInvalidToken) {
		t.Fatalf("consume of an expired token: %v, want ErrInvalidToken", err)
	}
}

func concurrentConsumes(t *testing.T, tokens order.Tokens, issue Issuer) {
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	issue(t, q, "alice", tok)
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = tokens.Consume(context.Background(), q, "alice", tok.Secret, fmt.Sprintf("order-%d", i), longLease, grace)
		})
	}
	wg.Wait()
	won, invalid := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, queue.ErrInvalidToken):
			invalid++
		default:
			t.Errorf("consume %d: %v", i, err)
		}
	}
	if won != 1 || invalid != n-1 {
		t.Fatalf("%d consumes won, %d were invalid; want 1 and %d", won, invalid, n-1)
	}
}

func settleOnce(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	tok := newToken(t, "tok-1")
	issue(t, q, "alice", tok)
	c := mustConsume(t, tokens, q, "alice", tok.Secret, "order-1", longLease)
	for _, step := range []struct {
		name           string
		tokenID, order string
		want           bool
	}{
		{"another attempt's order id", c.TokenID, "order-2", false},
		{"the attempt", c.TokenID, "order-1", true},
		{"the attempt again", c.TokenID, "order-1", false},
		{"a token never consumed", "tok-unknown", "order-1", false},
	} {
		got, err := tokens.Settle(ctx, q, "alice", step.tokenID, step.order)
		if err != nil || got != step.want {
			t.Fatalf("settle %s: %v %v, want %v", step.name, got, err, step.want)
		}
	}
	// Settled is spent: its holder's retry is told so, and it buys nothing.
	if chk, err := tokens.CheckToken(ctx, q, "alice", tok.Secret); err != nil || chk.State != queue.TokenSpent {
		t.Fatalf("check after settle: %+v %v, want SPENT", chk, err)
	}
	if _, err := tokens.Consume(ctx, q, "alice", tok.Secret, "order-3", longLease, grace); !errors.Is(err, queue.ErrInvalidToken) {
		t.Fatalf("consume after settle: %v, want ErrInvalidToken", err)
	}
}

func overdueEndedOnly(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	// Short, but long enough that a busy machine checks before it ends
	// (100 ms lapsed before the first check with the other core busy).
	const short = 2 * time.Second
	var lapsed queue.Consumed
	start := time.Now().Truncate(time.Millisecond)
	for _, u := range []struct {
		user  string
		lease time.Duration
		then  string // "settle", "hand off" or nothing
	}{
		{"live", longLease, ""},
		{"lapsed", short, ""},
		{"settled", short, "settle"},
		{"handed", short, "hand off"},
	} {
		tok := newToken(t, "tok-"+u.user)
		issue(t, q, u.user, tok)
		c := mustConsume(t, tokens, q, u.user, tok.Secret, "order-"+u.user, u.lease)
		switch u.then {
		case "settle":
			if ok, err := tokens.Settle(ctx, q, u.user, c.TokenID, "order-"+u.user); err != nil || !ok {
				t.Fatalf("settle %s: %v %v", u.user, ok, err)
			}
		case "hand off":
			if err := tokens.HandOff(ctx, q, u.user, c.TokenID); err != nil {
				t.Fatalf("hand off %s: %v", u.user, err)
			}
		}
		if u.user == "lapsed" {
			lapsed = c
		}
	}
	end := time.Now()
	if over, err := tokens.Overdue(ctx, q, 10); err != nil || len(over) != 0 {
		t.Fatalf("overdue before any lease ended: %+v %v, want none", over, err)
	}
	time.Sleep(short + 150*time.Millisecond)
	over, err := tokens.Overdue(ctx, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := queue.InflightToken{TokenID: "tok-lapsed", UserID: "lapsed", OrderID: "order-lapsed", ExpiresAt: lapsed.ExpiresAt}
	if len(over) != 1 {
		t.Fatalf("overdue %+v, want only %+v", over, want)
	}
	got := over[0]
	deadline := got.Deadline
	got.Deadline = time.Time{}
	if got != want || deadline.Before(start.Add(short)) || deadline.After(end.Add(short)) {
		t.Fatalf("overdue %+v with deadline %v, want %+v with one in [%v, %v]", over[0], deadline, want, start.Add(short), end.Add(short))
	}
	if other, err := tokens.Overdue(ctx, queuetest.ID(t), 10); err != nil || len(other) != 0 {
		t.Fatalf("overdue of another queue: %+v %v, want none", other, err)
	}
}

func overdueOrderAndLimit(t *testing.T, tokens order.Tokens, issue Issuer) {
	ctx := context.Background()
	q := queuetest.ID(t)
	for i, user := range []string{"first", "second", "third"} {
		tok := newToken(t, "tok-"+user)
		issue(t, q, user, tok)
		// Leases of 150, 100 and 50 ms: the last consumed ends first.
		mustConsume(t, tokens, q, user, tok.Secret, "order-"+user, time.Duration(3-i)*50*time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	over, err := tokens.Overdue(ctx, q, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(over) != 2 || over[0].UserID != "third" || over[1].UserID != "second" || !over[0].Deadline.Before(over[1].Deadline) {
		t.Fatalf("overdue with limit 2: %+v, want third then second", over)
	}
}
