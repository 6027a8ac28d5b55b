package order_test

import (
	"context"
	"errors"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// status stands in for the HTTP port's rendering: any distinct number per
// outcome does, since PlaceOnce keeps or forgets an answer by the error,
// never by its status.
func status(err error) int {
	var rl *order.RateLimitedError
	switch {
	case err == nil:
		return 201
	case errors.As(err, &rl):
		return 429
	case errors.Is(err, queue.ErrInvalidToken):
		return 403
	case errors.Is(err, order.ErrSoldOut):
		return 409
	case errors.Is(err, order.ErrUnavailable):
		return 503
	}
	return 500
}

// PlaceOnce: the cheap check first, then the key, then the order; final
// answers are kept for retries, passing ones free the key, and a spent
// token's holder only ever gets a stored answer back.
func TestPlaceOnce(t *testing.T) {
	stored := order.StoredAnswer{Status: 201, Body: []byte(`{"orderId":"first"}`), Done: true}
	for _, tc := range []struct {
		name     string
		check    queue.TokenCheckState // alice's token "secret"
		key      string
		limited  bool                // the queue's rate limit is used up
		placeErr error               // the order transaction's failure
		kept     *order.StoredAnswer // already under alice|k: an answer (Done) or a claim
		// want
		err        error
		status     int
		replayed   bool
		consumed   int
		calls      map[string]int // of the repo; absent = 0
		keptStatus int            // the answer kept under alice|k afterwards; 0 = none, -1 = a claim
	}{
		{name: "order without a key", check: queue.TokenValid,
			status: 201, consumed: 1, calls: map[string]int{"PlaceOrder": 1}},
		{name: "order with a key is kept in its commit", check: queue.TokenValid, key: "k",
			status: 201, consumed: 1, keptStatus: 201,
			calls: map[string]int{"BeginIdempotent": 1, "PlaceOrder": 1}},
		{name: "sold out is final: kept", check: queue.TokenValid, key: "k", placeErr: order.ErrSoldOut,
			status: 409, consumed: 1, keptStatus: 409,
			calls: map[string]int{"BeginIdempotent": 1, "PlaceOrder": 1, "AddEvent": 1, "FinishIdempotent": 1}},
		{name: "an outage passes: the key is freed", check: queue.TokenValid, key: "k", placeErr: order.ErrUnavailable,
			status: 503, consumed: 1,
			calls: map[string]int{"BeginIdempotent": 1, "PlaceOrder": 1, "AddEvent": 1, "AbandonIdempotent": 1}},
		{name: "rate limited before the key is claimed", check: queue.TokenValid, key: "k", limited: true,
			status: 429},
		{name: "junk token: answered, no key, no database", check: queue.TokenInvalid, key: "k",
			status: 403},
		{name: "spent token with a kept answer: replayed", check: queue.TokenSpent, key: "k",
			kept: &stored, status: 201, replayed: true, keptStatus: 201,
			calls: map[string]int{"LookupIdempotent": 1}},
		{name: "spent token, its key still running", check: queue.TokenSpent, key: "k",
			kept: &order.StoredAnswer{}, err: order.ErrIdempotencyInProgress, keptStatus: -1,
			calls: map[string]int{"LookupIdempotent": 1}},
		{name: "spent token, nothing kept under its key", check: queue.TokenSpent, key: "k",
			status: 403, calls: map[string]int{"LookupIdempotent": 1}},
		{name: "spent token without a key", check: queue.TokenSpent, status: 403},
		{name: "key answered before: replayed, nothing consumed", check: queue.TokenValid, key: "k",
			kept: &stored, status: 201, replayed: true, keptStatus: 201,
			calls: map[string]int{"BeginIdempotent": 1}},
		{name: "key claimed by a running request", check: queue.TokenValid, key: "k",
			kept: &order.StoredAnswer{}, err: order.ErrIdempotencyInProgress, keptStatus: -1,
			calls: map[string]int{"BeginIdempotent": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tokens, repo := tokensIn(t, tc.check), stocked(t)
			if tc.placeErr != nil {
				repo.Fail("PlaceOrder", tc.placeErr)
			}
			switch {
			case tc.kept == nil:
			case tc.kept.Done:
				if err := repo.FinishIdempotent(ctx, "alice", "k", tc.kept.Status, tc.kept.Body); err != nil {
					t.Fatal(err)
				}
			default:
				if _, fresh, err := repo.BeginIdempotent(ctx, "alice", "k"); err != nil || !fresh {
					t.Fatalf("claim alice|k: %v %v", fresh, err)
				}
			}
			repo.ResetCalls()
			var limits order.Limits
			if tc.limited {
				limits.Queue = refuseAll{}
			}
			svc := newService(t, tokens, repo, nil, limits)
			rendered := 0
			ans, replayed, err := svc.PlaceOnce(ctx,
				order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, Token: "secret"}, tc.key,
				func(o order.Order, err error) order.StoredAnswer {
					rendered++
					return order.StoredAnswer{Status: status(err), Body: []byte(o.ID), Done: true}
				})
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if ans.Status != tc.status || replayed != tc.replayed {
				t.Fatalf("answer %d replayed %v, want %d replayed %v", ans.Status, replayed, tc.status, tc.replayed)
			}
			wantRendered := map[bool]int{true: 0, false: 1}[tc.replayed || tc.err != nil]
			if tc.key != "" && tc.status == 201 && !tc.replayed {
				wantRendered++ // the kept answer, in the order's commit
			}
			if rendered != wantRendered {
				t.Fatalf("rendered %d times, want %d", rendered, wantRendered)
			}
			if replayed && string(ans.Body) != string(stored.Body) {
				t.Fatalf("replayed %q, want the kept %q", ans.Body, stored.Body)
			}
			if n := tokens.Calls("Consume"); n != tc.consumed {
				t.Fatalf("%d tokens consumed, want %d", n, tc.consumed)
			}
			for _, name := range []string{"BeginIdempotent", "LookupIdempotent", "FinishIdempotent", "AbandonIdempotent", "PlaceOrder", "AddEvent"} {
				if repo.Calls(name) != tc.calls[name] {
					t.Errorf("%s called %d times, want %d (all calls %v)", name, repo.Calls(name), tc.calls[name], repo.AllCalls())
				}
			}
			kept, ok, err := repo.LookupIdempotent(ctx, "alice", "k")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.keptStatus == 0 && ok:
				t.Fatalf("kept %+v under the key, want nothing", kept)
			case tc.keptStatus == -1 && (!ok || kept.Done):
				t.Fatalf("kept %+v (%v), want the running request's claim", kept, ok)
			case tc.keptStatus > 0 && (!kept.Done || kept.Status != tc.keptStatus):
				t.Fatalf("kept %+v, want status %d", kept, tc.keptStatus)
			}
		})
	}
}
