package order_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// The token store and the order database are ordertest's fakes, which
// pass the contracts redisstore and pg pass; what is left here is the
// setup the tests share and the stand-ins no contract covers.

// aliceToken is the entry token alice holds in queue sale, unless a test
// says otherwise: active at once, for a minute.
var aliceToken = ordertest.Token{Secret: "secret", ID: "tok-1", TTL: time.Minute}

// tokensIn returns a token store where alice's token "secret" checks as
// state: issued (VALID), issued to activate later (NOT_ACTIVE), consumed
// by an earlier order (SPENT), or never issued (INVALID). The calls of the
// setup are not counted.
func tokensIn(t *testing.T, state queue.TokenCheckState) *ordertest.Tokens {
	t.Helper()
	tokens := ordertest.NewTokens()
	tok := aliceToken
	switch state {
	case queue.TokenInvalid:
		return tokens
	case queue.TokenNotActive:
		tok.ActivateIn = time.Minute
	}
	tokens.Issue("sale", "alice", tok)
	if state == queue.TokenSpent {
		if _, err := tokens.Consume(context.Background(), "sale", "alice", tok.Secret, "order-before", time.Minute, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if chk, _ := tokens.CheckToken(context.Background(), "sale", "alice", tok.Secret); chk.State != state {
		t.Fatalf("alice's token checks %s, want %s", chk.State, state)
	}
	tokens.ResetCalls()
	return tokens
}

// stocked returns an order database selling sku-1 (stock 10) in queue
// sale. The calls of the setup are not counted.
func stocked(t *testing.T) *ordertest.Repo {
	t.Helper()
	repo := ordertest.NewRepo()
	if _, _, err := repo.UpsertProduct(context.Background(), order.Product{ID: "sku-1", QueueID: "sale", Name: "Sneaker", Stock: 10, PriceCents: 12999}); err != nil {
		t.Fatal(err)
	}
	repo.ResetCalls()
	return repo
}

// memPublisher is the direct publisher in memory.
type memPublisher struct {
	mu        sync.Mutex
	published []order.Event
}

func (p *memPublisher) PublishEvent(_ context.Context, e order.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published = append(p.published, e)
	return nil
}

// refuseAll is a rate limit that is always used up.
type refuseAll struct{}

func (refuseAll) Allow(context.Context, string) (bool, time.Duration, error) {
	return false, time.Second, nil
}

func newService(t *testing.T, tokens order.Tokens, repo order.Repo, direct order.DirectPublisher, limits order.Limits) *order.Service {
	t.Helper()
	svc, err := order.New(tokens, repo, direct, limits, slog.New(slog.NewTextHandler(io.Discard, nil)), order.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
