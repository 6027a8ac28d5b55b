package order_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// slowRepo's order transaction takes txTime.
type slowRepo struct{ *ordertest.Repo }

const txTime = 5 * time.Millisecond

func (r slowRepo) PlaceOrder(ctx context.Context, p order.Placement) (order.Order, error) {
	time.Sleep(txTime)
	return r.Repo.PlaceOrder(ctx, p)
}

// downTokens is a token store whose consume finds Redis down.
type downTokens struct{ order.Tokens }

func (downTokens) Consume(context.Context, string, string, string, string, time.Duration, time.Duration) (queue.Consumed, error) {
	return queue.Consumed{}, fmt.Errorf("consume: %w", queue.ErrUnavailable)
}

// What each kind of order request tells Health: an attempt with a consumed
// token is an order (created or not) with its duration; an outage or a
// timeout is unavailable, also before the consume; a request Screen turns
// away is nothing.
func TestPlaceReportsToHealth(t *testing.T) {
	for _, tc := range []struct {
		name      string
		check     queue.TokenCheckState
		key       string
		fail      string // the repo method that fails with err
		err       error
		redisDown bool
		limited   bool
		// want; reported false: no report for sale at all
		reported                     bool
		orders, created, unavailable int64
	}{
		{name: "created", check: queue.TokenValid, reported: true, orders: 1, created: 1},
		{name: "sold out", check: queue.TokenValid, fail: "PlaceOrder", err: order.ErrSoldOut, reported: true, orders: 1},
		{name: "database down", check: queue.TokenValid, fail: "PlaceOrder", err: fmt.Errorf("place order: %w", order.ErrUnavailable),
			reported: true, orders: 1, unavailable: 1},
		{name: "transaction out of time", check: queue.TokenValid, fail: "PlaceOrder", err: fmt.Errorf("place order: %w", context.DeadlineExceeded),
			reported: true, orders: 1, unavailable: 1},
		{name: "redis down at the consume", check: queue.TokenValid, redisDown: true, reported: true, unavailable: 1},
		{name: "database down at the key", check: queue.TokenValid, key: "k", fail: "BeginIdempotent", err: order.ErrUnavailable,
			reported: true, unavailable: 1},
		{name: "junk token", check: queue.TokenInvalid},
		{name: "rate limited", check: queue.TokenValid, limited: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tokens order.Tokens = tokensIn(t, tc.check)
			if tc.redisDown {
				tokens = downTokens{tokens}
			}
			repo := stocked(t)
			if tc.fail != "" {
				repo.Fail(tc.fail, tc.err)
			}
			var limits order.Limits
			if tc.limited {
				limits.Queue = refuseAll{}
			}
			health := order.NewHealth("replica-1")
			svc, err := order.New(tokens, slowRepo{repo}, &memPublisher{}, limits, slog.New(slog.NewTextHandler(io.Discard, nil)),
				order.Options{Health: health})
			if err != nil {
				t.Fatal(err)
			}
			_, _, _ = svc.PlaceOnce(context.Background(),
				order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, Token: "secret"}, tc.key,
				func(order.Order, error) order.StoredAnswer { return order.StoredAnswer{Status: 200, Done: true} })

			reports := health.Report(time.Now(), time.Second)
			if !tc.reported {
				if len(reports) != 0 {
					t.Fatalf("reports %+v, want none", reports)
				}
				return
			}
			if len(reports) != 1 {
				t.Fatalf("%d reports %+v, want one for sale", len(reports), reports)
			}
			r := reports[0]
			if r.QueueID != "sale" || r.Orders != tc.orders || r.Created != tc.created || r.Unavailable != tc.unavailable {
				t.Fatalf("report %+v, want %d orders, %d created, %d unavailable", r, tc.orders, tc.created, tc.unavailable)
			}
			// The duration runs from the consume to the answer, so it holds
			// the transaction's 5 ms; no order, no duration.
			if (tc.orders > 0 && (r.P95 < txTime || r.P95 > time.Second)) || (tc.orders == 0 && r.P95 != 0) {
				t.Fatalf("P95 %v for %d orders, want between %v and 1s for one, 0 for none", r.P95, tc.orders, txTime)
			}
		})
	}
}
