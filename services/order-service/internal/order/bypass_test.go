package order_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/grant"
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

// signer signs the tests' entry tokens as the dispatcher would.
func signer(t *testing.T) *grant.Signer {
	t.Helper()
	s, err := grant.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signedToken is a token the dispatcher signed for queue q at at, on
// line 0.
func signedToken(t *testing.T, s *grant.Signer, q string, at time.Time) queue.Grant {
	t.Helper()
	g, err := s.Grants(q, 0, 1, at)
	if err != nil {
		t.Fatal(err)
	}
	return g[0]
}

// TestBypassDecision: while this replica's probe finds Redis down, a queue
// that fails OPEN takes an order from the holder of an entry token signed
// for it and still live, marked Bypassed with the token's own id, without
// asking Redis; no token, junk, a token of another queue or an expired one
// is refused (403); a CLOSED, paused, unstarted or unknown queue, or a
// service without the signing keys, answers unavailable. A token check
// that fails while the probe finds Redis up (a held reply, a pool used up
// by load) is unavailable, never a bypass: the finding, where a junk token
// got a bypassed order under a held check.
func TestBypassDecision(t *testing.T) {
	sig := signer(t)
	open, closed := queue.DefaultConfig(), queue.DefaultConfig()
	open.FailMode = queue.FailOpen
	now := time.Now()
	good := signedToken(t, sig, "sale", now.Add(-time.Minute))
	for _, tc := range []struct {
		name       string
		mode       queue.FailMode // "" : the queue is not in the cache; "PAUSED", "SCHEDULED": fails OPEN, but paused / not started
		token      string
		probeDown  bool // the configuration cache's probe finds Redis down
		checkFails bool // the request's own Redis calls fail
		noKeys     bool
		wantErr    error // nil: a bypassed order
		tokenCalls int64
	}{
		{"open, signed token, Redis down", queue.FailOpen, good.Secret, true, true, false, nil, 0},
		{"open, junk token, Redis down", queue.FailOpen, fmt.Sprintf("%032x", 7), true, true, false, queue.ErrInvalidToken, 0},
		{"open, no token, Redis down", queue.FailOpen, "", true, true, false, queue.ErrInvalidToken, 0},
		{"open, another queue's token, Redis down", queue.FailOpen, signedToken(t, sig, "other", now).Secret, true, true, false, queue.ErrInvalidToken, 0},
		{"open, an expired token, Redis down", queue.FailOpen, signedToken(t, sig, "sale", now.Add(-time.Hour)).Secret, true, true, false, queue.ErrInvalidToken, 0},
		{"open, a token from the future, Redis down", queue.FailOpen, signedToken(t, sig, "sale", now.Add(time.Hour)).Secret, true, true, false, queue.ErrInvalidToken, 0},
		{"open, junk token, the check fails, probe up", queue.FailOpen, fmt.Sprintf("%032x", 7), false, true, false, queue.ErrUnavailable, 1},
		{"open, signed token, the check fails, probe up", queue.FailOpen, good.Secret, false, true, false, queue.ErrUnavailable, 1},
		{"open, signed token, Redis down, no keys here", queue.FailOpen, good.Secret, true, true, true, queue.ErrUnavailable, 0},
		{"closed, signed token, Redis down", queue.FailClosed, good.Secret, true, true, false, queue.ErrUnavailable, 0},
		{"unknown queue, signed token, Redis down", "", good.Secret, true, true, false, queue.ErrUnavailable, 0},
		{"open, no token, Redis up", queue.FailOpen, "", false, false, false, queue.ErrInvalidToken, 0},
		{"open but paused, signed token, Redis down", "PAUSED", good.Secret, true, true, false, queue.ErrUnavailable, 0},
		{"open but not started, signed token, Redis down", "SCHEDULED", good.Secret, true, true, false, queue.ErrUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgs := configs{cfgs: map[string]queue.Config{}, reachable: !tc.probeDown}
			switch tc.mode {
			case queue.FailOpen:
				cfgs.cfgs = map[string]queue.Config{"sale": open}
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
			if tc.checkFails {
				tokens = down
			}
			o := order.Options{Configs: cfgs, Tokens: sig}
			if tc.noKeys {
				o.Tokens = nil
			}
			repo := stocked(t)
			svc, err := order.New(tokens, repo, nil, order.Limits{}, slog.New(slog.NewTextHandler(io.Discard, nil)), o)
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
			if gotErr != nil || !got.Bypassed || got.EntryTokenID != good.TokenID {
				t.Fatalf("answered %+v, %v; want a bypassed order with token id %s", got, gotErr, good.TokenID)
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

// TestBypassedFailureRecordsNothing: a bypassed attempt that fails (the
// token used already, the order limit, sold out) answers as any order
// would and records no OrderFailed. With no maxOrdersPerUser on the queue,
// OutageMaxOrders (1) bounds a person's orders while Redis is down.
func TestBypassedFailureRecordsNothing(t *testing.T) {
	sig := signer(t)
	cfg := queue.DefaultConfig()
	cfg.FailMode = queue.FailOpen
	repo := stocked(t)
	direct := &memPublisher{}
	svc, err := order.New(ordertest.NewTokens(), repo, direct, order.Limits{}, slog.New(slog.NewTextHandler(io.Discard, nil)),
		order.Options{Configs: configs{cfgs: map[string]queue.Config{"sale": cfg}}, Tokens: sig, OutageMaxOrders: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, second, bobs := signedToken(t, sig, "sale", time.Now()), signedToken(t, sig, "sale", time.Now()), signedToken(t, sig, "sale", time.Now())
	var errs []error
	for _, r := range []order.PlaceRequest{
		{UserID: "alice", Token: first.Secret, Quantity: 1},
		{UserID: "carol", Token: first.Secret, Quantity: 1}, // alice's token, shared
		{UserID: "alice", Token: second.Secret, Quantity: 1},
		{UserID: "bob", Token: bobs.Secret, Quantity: 10},
	} {
		r.QueueID, r.ProductID = "sale", "sku-1"
		_, _, err := svc.PlaceOnce(context.Background(), r, "", func(_ order.Order, err error) order.StoredAnswer {
			errs = append(errs, err)
			return order.StoredAnswer{Done: true}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if errs[0] != nil || !errors.Is(errs[1], order.ErrDuplicateToken) || !errors.Is(errs[2], order.ErrOrderLimitReached) || !errors.Is(errs[3], order.ErrSoldOut) {
		t.Fatalf("answers %v, want created, token used, order limit, sold out", errs)
	}
	if n := len(repo.Events()); n != 1 || len(direct.published) != 0 {
		t.Fatalf("%d events in the outbox and %d published directly, want the one OrderCreated only", n, len(direct.published))
	}
}
