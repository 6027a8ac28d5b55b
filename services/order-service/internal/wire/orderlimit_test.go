package wire

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestOrderLimitPerPersonAcrossEntries: with maxOrdersPerUser=1 a buyer who
// ordered, entered the line again and was admitted again is refused with
// 409 order-limit-reached; her token is spent (OrderFailed
// ORDER_LIMIT_REACHED, not restorable), no stock is taken, other buyers are
// not affected, and raising the knob applies to the next order at once.
func TestOrderLimitPerPersonAcrossEntries(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.restorer()
	ctx := context.Background()
	s.product("p1", 10)
	setLimit := func(n int64) {
		t.Helper()
		if _, _, err := s.store.UpdateConfig(ctx, s.q, func(c queue.Config, _ bool) (queue.Config, error) {
			c.MaxOrdersPerUser = n
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(1)

	if r := s.order("alice", s.admit("alice")["alice"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("alice's first order: %d %s", r.status, r.body)
	}
	// She is ORDERED; entering again gives her a new place and a new token.
	second := s.admit("alice")["alice"]
	r := s.order("alice", second, "p1", 1)
	if r.status != http.StatusConflict || r.problemType() != "order-limit-reached" {
		t.Fatalf("alice's second order: %d %s, want 409 order-limit-reached", r.status, r.body)
	}
	// The refused token is spent, not given back.
	if r := s.order("alice", second, "p1", 1); r.status != http.StatusForbidden || r.problemType() != "invalid-entry-token" {
		t.Fatalf("alice's refused token again: %d %s, want 403 invalid-entry-token", r.status, r.body)
	}
	if r := s.order("bob", s.admit("bob")["bob"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("bob's order: %d %s", r.status, r.body)
	}
	if st := s.stock("p1"); st != 8 {
		t.Fatalf("stock %d after two orders and one refused, want 8", st)
	}
	testenv.WaitFor(t, 10*time.Second, "one OrderFailed", func() bool { return len(s.received(&waitingroomv1.OrderFailed{})) == 1 })
	var ev waitingroomv1.OrderFailed
	if err := proto.Unmarshal(s.received(&waitingroomv1.OrderFailed{})[0].Body, &ev); err != nil ||
		ev.GetReason() != waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_ORDER_LIMIT_REACHED || ev.GetRestorable() || ev.GetUserId() != "alice" {
		t.Fatalf("OrderFailed %v %v, want alice's ORDER_LIMIT_REACHED, not restorable", &ev, err)
	}

	// Her refused attempt is over once the dispatcher's consumer freed its
	// slot; then she may enter again.
	testenv.WaitFor(t, 10*time.Second, "alice's refused attempt freed", func() bool {
		st, err := s.store.Position(ctx, s.q, "alice")
		return err == nil && !st.Ordering
	})
	// Raised live: her next entry may order once more.
	setLimit(2)
	if r := s.order("alice", s.admit("alice")["alice"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("alice's order at a limit of 2: %d %s", r.status, r.body)
	}
	if n := s.queryInt("SELECT count(*) FROM orders WHERE queue_id = $1 AND user_id = 'alice'", s.q); n != 2 {
		t.Fatalf("alice has %d orders, want 2", n)
	}
}
