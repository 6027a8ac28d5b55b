package order_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// overloadedTokens is a token store whose calls find every Redis
// connection of the process busy (go-redis's pool timeout), at the check
// or at the consume.
type overloadedTokens struct {
	order.Tokens
	atCheck bool
}

func (t overloadedTokens) CheckToken(ctx context.Context, q, user, secret string) (queue.TokenCheck, error) {
	if t.atCheck {
		return queue.TokenCheck{}, fmt.Errorf("check token: %w", queue.ErrOverloaded)
	}
	return t.Tokens.CheckToken(ctx, q, user, secret)
}

func (t overloadedTokens) Consume(context.Context, string, string, string, string, time.Duration, time.Duration) (queue.Consumed, error) {
	return queue.Consumed{}, fmt.Errorf("consume: %w", queue.ErrOverloaded)
}

// openQueue is a configuration cache whose every queue fails OPEN, and
// which says Redis is reachable.
type openQueue struct{}

func (openQueue) Get(string) (queue.Config, bool) {
	return queue.Config{FailMode: queue.FailOpen, State: queue.Open, AdmissionRatePerSec: 100}, true
}
func (openQueue) Reachable() bool { return true }

// The process's own overload is not the order path's health: an attempt
// that found no free Redis connection is answered 503 with its token
// unused, and Health counts it neither as an order nor as unavailable
// (a flood that causes it must not cut admission); nor is a queue that
// fails OPEN bypassed for it (Redis is there; only this process is busy).
func TestOverloadIsNotReportedNorBypassed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		atCheck bool
	}{{"at the check", true}, {"at the consume", false}} {
		t.Run(tc.name, func(t *testing.T) {
			repo := stocked(t)
			health := order.NewHealth("replica-1")
			svc, err := order.New(overloadedTokens{Tokens: tokensIn(t, queue.TokenValid), atCheck: tc.atCheck}, repo, &memPublisher{}, order.Limits{},
				slog.New(slog.NewTextHandler(io.Discard, nil)), order.Options{Health: health, Configs: openQueue{}})
			if err != nil {
				t.Fatal(err)
			}
			var got error
			_, _, err = svc.PlaceOnce(context.Background(),
				order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, Token: "secret"}, "",
				func(_ order.Order, err error) order.StoredAnswer {
					got = err
					return order.StoredAnswer{Status: http.StatusOK, Done: true}
				})
			if err != nil || got == nil || !errors.Is(got, queue.ErrOverloaded) {
				t.Fatalf("answer for %v (PlaceOnce %v), want queue.ErrOverloaded", got, err)
			}
			if n := repo.Calls("PlaceOrder"); n != 0 {
				t.Fatalf("%d orders placed: the queue was bypassed for an overload", n)
			}
			for _, r := range health.Report(time.Now(), time.Second) {
				if r.Orders != 0 || r.Unavailable != 0 || r.P95 != 0 {
					t.Fatalf("report %+v, want 0 orders, 0 unavailable, no P95", r)
				}
			}
		})
	}
}
