package order_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// An attempt that consumed a token and placed no order is recorded as one
// Failed event, with the reason and restorability the order path's policy
// gives its cause; through the outbox, or, when the outbox is down and the
// cause says nothing was stored (sold out: the transaction refused it; no
// connection: nothing was sent), straight to the broker; and the token is handed off to restoration
// either way.
func TestFailedAttemptsRecordOneEvent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cause      error
		outboxDown bool
		reason     order.FailureReason
		restorable bool
	}{
		{"sold out", order.ErrSoldOut, false, order.ReasonSoldOut, false},
		{"order limit reached", fmt.Errorf("place order: %w", order.ErrOrderLimitReached), false, order.ReasonOrderLimit, false},
		{"token used for an order", order.ErrDuplicateToken, false, order.ReasonInvalidRequest, false},
		{"no such product", order.ErrProductNotFound, false, order.ReasonInvalidRequest, true},
		{"timed out", fmt.Errorf("place order: %w", context.DeadlineExceeded), false, order.ReasonTimeout, true},
		{"sold out, then the database went down", order.ErrSoldOut, true, order.ReasonSoldOut, false},
		{"database unreachable", fmt.Errorf("%w (%w)", order.ErrUnavailable, order.ErrNothingStored), true, order.ReasonDatabaseError, true},
		{"anything else", errors.New("disk full"), false, order.ReasonDatabaseError, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens, repo, direct := tokensIn(t, queue.TokenValid), stocked(t), &memPublisher{}
			repo.Fail("PlaceOrder", tc.cause)
			if tc.outboxDown {
				repo.Fail("AddEvent", order.ErrUnavailable)
			}
			svc := newService(t, tokens, repo, direct, order.Limits{})
			_, err := svc.Place(context.Background(), order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, Token: "secret"})
			if !errors.Is(err, tc.cause) {
				t.Fatalf("Place: %v, want %v", err, tc.cause)
			}
			recorded, other := repo.Events(), direct.published
			if tc.outboxDown {
				recorded, other = direct.published, repo.Events()
			}
			if len(recorded) != 1 || len(other) != 0 {
				t.Fatalf("%d events in the outbox, %d published directly; want 1 where it could go", len(repo.Events()), len(direct.published))
			}
			f, ok := recorded[0].(order.Failed)
			if !ok {
				t.Fatalf("recorded %T, want order.Failed", recorded[0])
			}
			if f.Reason != tc.reason || f.Restorable != tc.restorable || f.QueueID != "sale" || f.UserID != "alice" || f.TokenID != "tok-1" ||
				f.OrderID == "" || f.EventID() != "tok-1.failed."+f.OrderID || f.RemainingTTL <= 0 || f.RemainingTTL > time.Minute {
				t.Fatalf("recorded %+v, want %s restorable %v for tok-1 with under a minute left", f, tc.reason, tc.restorable)
			}
			if h := tokens.HandedOff(); len(h) != 1 || h[0] != "tok-1" || tokens.Calls("Settle") != 0 {
				t.Fatalf("handed off %v, settled %d; want tok-1 handed off, nothing settled", h, tokens.Calls("Settle"))
			}
		})
	}
}

// After an error that may hide a commit (the database went down, a
// timeout) the outbox is the only place a failure may be recorded: it is
// checked there against the attempt's order. With the outbox down too,
// nothing is published and nothing handed off; the inflight lease stays
// for the reaper, which records the attempt once the database answers.
func TestAmbiguousFailureWithTheOutboxDownWaitsForTheReaper(t *testing.T) {
	for _, cause := range []error{order.ErrUnavailable, fmt.Errorf("place order: %w", context.DeadlineExceeded), errors.New("conn closed")} {
		t.Run(cause.Error(), func(t *testing.T) {
			tokens, repo, direct := tokensIn(t, queue.TokenValid), stocked(t), &memPublisher{}
			repo.Fail("PlaceOrder", cause)
			repo.Fail("AddEvent", order.ErrUnavailable)
			svc := newService(t, tokens, repo, direct, order.Limits{})
			_, err := svc.Place(context.Background(), order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, Token: "secret"})
			if !errors.Is(err, cause) {
				t.Fatalf("Place: %v, want %v", err, cause)
			}
			if n, d, h := len(repo.Events()), len(direct.published), len(tokens.HandedOff()); n != 0 || d != 0 || h != 0 {
				t.Fatalf("%d events in the outbox, %d published directly, %d handed off; want none (the reaper's)", n, d, h)
			}
			if a, c := repo.Calls("AddEvent"), tokens.Calls("Settle"); a != 1 || c != 0 {
				t.Fatalf("AddEvent called %d times, Settle %d; want 1 and 0", a, c)
			}
		})
	}
}

// An order whose COMMIT landed but whose answer did not (the transaction
// reported a timeout or a dropped connection) is an order: the Failed the
// error path tries to record is refused by the outbox (one resolution per
// attempt), the token is settled, not handed back, and the buyer is
// answered with the stored order.
func TestCommitAnsweredLateIsAnOrder(t *testing.T) {
	for _, cause := range []error{fmt.Errorf("place order: %w", context.DeadlineExceeded), fmt.Errorf("place order: %w", order.ErrUnavailable)} {
		t.Run(cause.Error(), func(t *testing.T) {
			tokens, repo := tokensIn(t, queue.TokenValid), stocked(t)
			repo.AnswerLate("PlaceOrder", cause)
			svc := newService(t, tokens, repo, &memPublisher{}, order.Limits{})
			o, err := svc.Place(context.Background(), order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1, Token: "secret"})
			if err != nil || o.ID == "" || o.EntryTokenID != "tok-1" || o.Status != order.StatusCreated {
				t.Fatalf("Place: %+v, %v; want the committed order", o, err)
			}
			events := repo.Events()
			if len(events) != 1 {
				t.Fatalf("%d events, want the one Created", len(events))
			}
			if c, ok := events[0].(order.Created); !ok || c.Order.ID != o.ID {
				t.Fatalf("event %+v, want Created of %s", events[0], o.ID)
			}
			if s, h := tokens.Calls("Settle"), len(tokens.HandedOff()); s != 1 || h != 0 {
				t.Fatalf("Settle %d, handed off %d; want the token settled once, never handed back", s, h)
			}
		})
	}
}

// A committed order records one Created event for the stored order, and
// the token is settled.
func TestPlacedOrderRecordsCreated(t *testing.T) {
	tokens, repo := tokensIn(t, queue.TokenValid), stocked(t)
	svc := newService(t, tokens, repo, nil, order.Limits{})
	ctx := context.Background()
	o, err := svc.Place(ctx, order.PlaceRequest{UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 2, Token: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	events := repo.Events()
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	c, ok := events[0].(order.Created)
	if !ok || c.Order != o || c.EventID() != o.ID+".created" || o.EntryTokenID != "tok-1" || o.Quantity != 2 {
		t.Fatalf("recorded %+v for order %+v", events[0], o)
	}
	if ps, _ := repo.Products(ctx, "sale"); len(ps) != 1 || ps[0].Stock != 8 {
		t.Fatalf("products %+v, want sku-1 with 10 - 2 left", ps)
	}
	if tokens.Calls("Settle") != 1 || len(tokens.HandedOff()) != 0 {
		t.Fatalf("settled %d, handed off %v; want 1 and none", tokens.Calls("Settle"), tokens.HandedOff())
	}
	// Consumed and settled: the token is spent.
	if chk, _ := tokens.CheckToken(ctx, "sale", "alice", "secret"); chk.State != queue.TokenSpent {
		t.Fatalf("alice's token checks %s after the order, want SPENT", chk.State)
	}
}
