package order_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// configs is the configuration cache as the order path sees it.
type configs struct {
	cfgs      map[string]queue.Config
	reachable bool
}

func (c configs) Get(q string) (queue.Config, bool) { cfg, ok := c.cfgs[q]; return cfg, ok }
func (c configs) Reachable() bool                   { return c.reachable }

// goneTokens is a token store whose Redis does not answer: every call fails
// with queue.ErrUnavailable, and is counted.
type goneTokens struct {
	order.Tokens
	calls atomic.Int64
}

func (d *goneTokens) CheckToken(context.Context, string, string, string) (queue.TokenCheck, error) {
	d.calls.Add(1)
	return queue.TokenCheck{}, queue.ErrUnavailable
}

func (d *goneTokens) Consume(context.Context, string, string, string, string, time.Duration, time.Duration) (queue.Consumed, error) {
	d.calls.Add(1)
	return queue.Consumed{}, queue.ErrUnavailable
}

// TestBypassDecision: an order of a queue that fails OPEN is taken without
// a token when Redis is gone (the token check failed, or the cache says
// unreachable and there is no token to check), marked Bypassed with a token
// id of its own, and never asks Redis when it need not; a CLOSED or unknown
// queue answers unavailable; with Redis up a request without a token is
// refused as always.
func TestBypassDecision(t *testing.T) {
	open, closed := queue.DefaultConfig(), queue.DefaultConfig()
	open.FailMode = queue.FailOpen
	cached := map[string]queue.Config{"sale": open}
	for _, tc := range []struct {
		name       string
		mode       queue.FailMode // "" : the queue is not in the cache; "PAUSED", "SCHEDULED": fails OPEN, but paused / not started
		token      string
		reachable  bool
		redisDown  bool
		wantErr    error // nil: a bypassed order
		tokenCalls int64
	}{
		{"open, no token, cache says down", queue.FailOpen, "", false, true, nil, 0},
		{"open, a token, the check fails", queue.FailOpen, "secret", true, true, nil, 1},
		{"open, a token, cache says down too", queue.FailOpen, "secret", false, true, nil, 1},
		{"closed, no token, cache says down", queue.FailClosed, "", false, true, queue.ErrUnavailable, 0},
		{"closed, a token, the check fails", queue.FailClosed, "secret", true, true, queue.ErrUnavailable, 1},
		{"unknown queue, no token, cache says down", "", "", false, true, queue.ErrUnavailable, 0},
		{"open, no token, Redis up", queue.FailOpen, "", true, false, queue.ErrInvalidToken, 0},
		{"open but paused, no token, cache says down", "PAUSED", "", false, true, queue.ErrUnavailable, 0},
		{"open but not started, no token, cache says down", "SCHEDULED", "", false, true, queue.ErrUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgs := configs{cfgs: map[string]queue.Config{}, reachable: tc.reachable}
			switch tc.mode {
			case queue.FailOpen:
				cfgs.cfgs = cached
			case queue.FailClosed:
				cfgs.cfgs = map[string]queue.Config{"sale": closed}
			case "PAUSED":
				paused := open
				paused.State = queue.Paused
				cfgs.cfgs = map[string]queue.Config{"sale": paused}
			case "SCHEDULED":
				later := open
				later.StartsAt = time.Now().Add(time.Hour)
				cfgs.cfgs = map[string]queue.Config{"sale": later}
			}
			var tokens order.Tokens = ordertest.NewTokens()
			down := &goneTokens{Tokens: tokens}
			if tc.redisDown {
				tokens = down
			}
			repo := stocked(t)
			svc, err := order.New(tokens, repo, nil, order.Limits{}, slog.New(slog.NewTextHandler(io.Discard, nil)), order.Options{Configs: cfgs})
			if err != nil {
				t.Fatal(err)
			}
			var got order.Order
			var gotErr error
			_, _, err = svc.PlaceOnce(context.Background(), order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 2, Token: tc.token}, "",
				func(o order.Order, err error) order.StoredAnswer {
					got, gotErr = o, err
					return order.StoredAnswer{Done: true}
				})
			if err != nil {
				t.Fatal(err)
			}
			if down.calls.Load() != tc.tokenCalls {
				t.Errorf("%d calls on the token store, want %d", down.calls.Load(), tc.tokenCalls)
			}
			if tc.wantErr != nil {
				if !errors.Is(gotErr, tc.wantErr) || repo.Calls("PlaceOrder") != 0 {
					t.Fatalf("answered %v after %d PlaceOrder calls, want %v and none", gotErr, repo.Calls("PlaceOrder"), tc.wantErr)
				}
				return
			}
			if gotErr != nil || !got.Bypassed || got.EntryTokenID != order.BypassTokenPrefix+got.ID {
				t.Fatalf("answered %+v, %v; want a bypassed order with token id bypass-<id>", got, gotErr)
			}
			evs := repo.Events()
			if c, ok := evs[0].(order.Created); len(evs) != 1 || !ok || !c.Order.Bypassed {
				t.Fatalf("events %+v, want one bypassed Created", evs)
			}
			if p, _ := repo.Products(context.Background(), "sale"); p[0].Stock != 8 {
				t.Fatalf("stock %d, want 8", p[0].Stock)
			}
		})
	}
}

// TestBypassedFailureRecordsNothing: a bypassed attempt that fails (sold
// out, order limit) answers as any order would and records no OrderFailed.
func TestBypassedFailureRecordsNothing(t *testing.T) {
	cfg := queue.DefaultConfig()
	cfg.FailMode, cfg.MaxOrdersPerUser = queue.FailOpen, 1
	repo := stocked(t)
	direct := &memPublisher{}
	svc, err := order.New(ordertest.NewTokens(), repo, direct, order.Limits{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		order.Options{Configs: configs{cfgs: map[string]queue.Config{"sale": cfg}}})
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, qty := range []int{1, 1, 10} {
		user := "alice"
		if qty == 10 {
			user = "bob"
		}
		_, _, err := svc.PlaceOnce(context.Background(), order.PlaceRequest{UserID: user, QueueID: "sale", ProductID: "sku-1", Quantity: qty}, "",
			func(_ order.Order, err error) order.StoredAnswer {
				errs = append(errs, err)
				return order.StoredAnswer{Done: true}
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	if errs[0] != nil || !errors.Is(errs[1], order.ErrOrderLimitReached) || !errors.Is(errs[2], order.ErrSoldOut) {
		t.Fatalf("answers %v, want created, order limit, sold out", errs)
	}
	if n := len(repo.Events()); n != 1 || len(direct.published) != 0 {
		t.Fatalf("%d events in the outbox and %d published directly, want the one OrderCreated only", n, len(direct.published))
	}
}
