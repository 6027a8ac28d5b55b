package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// lookedEarly is a Repo whose OrderByToken answers as it would have just
// before the order's transaction committed: nothing.
type lookedEarly struct{ order.Repo }

func (lookedEarly) OrderByToken(context.Context, string) (order.Order, bool, error) {
	return order.Order{}, false, nil
}

// The reaper looks for an overdue attempt's order, finds none, and records
// it ABANDONED; had the order's transaction committed in between, the
// outbox refuses the OrderFailed (one resolution per attempt) and the
// reaper settles the token instead of handing it back for a second order.
func TestReaperSettlesAnOrderThatCommitsAsItLooks(t *testing.T) {
	tokens, repo := tokensIn(t, queue.TokenValid), stocked(t)
	ctx := context.Background()
	c, err := tokens.Consume(ctx, "sale", "alice", aliceToken.Secret, "order-1", time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	placed, err := repo.PlaceOrder(ctx, order.Placement{Order: order.Order{ID: "order-1", UserID: "alice", QueueID: "sale", ProductID: "sku-1", Quantity: 1,
		EntryTokenID: c.TokenID, Status: order.StatusCreated}, Event: func(o order.Order) order.Event { return order.Created{Order: o} }})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the 1 ms lease is over
	svc := newService(t, tokens, lookedEarly{repo}, nil, order.Limits{})
	res, err := svc.Reap(ctx)
	if err != nil || res.Settled != 1 || res.Abandoned != 0 {
		t.Fatalf("Reap: %+v, %v; want 1 settled, 0 abandoned", res, err)
	}
	if h, s := len(tokens.HandedOff()), tokens.Calls("Settle"); h != 0 || s != 1 {
		t.Fatalf("handed off %d, settled %d; want 0 and 1", h, s)
	}
	events := repo.Events()
	if len(events) != 1 || events[0].EventID() != placed.ID+".created" {
		t.Fatalf("outbox %v, want only the order's Created", events)
	}
}
