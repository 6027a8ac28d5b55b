package wire

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func TestFiftyConcurrentOrdersWithOneTokenCreateExactlyOne(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.product("p1", 100)
	secret := s.admit("buyer")["buyer"]

	const n = 50
	res := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i] = s.order("buyer", secret, "p1", 1) })
	}
	wg.Wait()
	created, rejected := 0, 0
	for i, r := range res {
		switch {
		case r.status == http.StatusCreated:
			created++
		case r.status == http.StatusForbidden && r.problemType() == "invalid-entry-token":
			rejected++
		default:
			t.Errorf("order %d: %d %s", i, r.status, r.body)
		}
	}
	if created != 1 || rejected != 49 {
		t.Fatalf("%d created, %d rejected; want 1 and 49", created, rejected)
	}
	if st := s.stock("p1"); st != 99 {
		t.Fatalf("stock %d, want 99", st)
	}
	testenv.WaitFor(t, 10*time.Second, "the OrderCreated event", func() bool { return len(s.received(&waitingroomv1.OrderCreated{})) == 1 })
	if st, _ := s.store.Position(context.Background(), s.q, "buyer"); st.State != queue.Ordered {
		t.Fatalf("position after the order: %s, want ORDERED", st.State)
	}
}

func TestStockTenHundredBuyersExactlyTenOrders(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.product("hot", 10)
	users := make([]string, 100)
	for i := range users {
		users[i] = fmt.Sprintf("buyer-%03d", i)
	}
	secrets := s.admit(users...)

	res := make([]response, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() { res[i] = s.order(u, secrets[u], "hot", 1) })
	}
	wg.Wait()
	created, soldOut := 0, 0
	for i, r := range res {
		switch {
		case r.status == http.StatusCreated:
			created++
		case r.status == http.StatusConflict && r.problemType() == "sold-out":
			soldOut++
		default:
			t.Errorf("buyer %d: %d %s", i, r.status, r.body)
		}
	}
	if created != 10 || soldOut != 90 {
		t.Fatalf("%d created, %d sold out; want 10 and 90", created, soldOut)
	}
	if st := s.stock("hot"); st != 0 {
		t.Fatalf("stock %d, want 0", st)
	}
	// The sold-out buyers' slots are freed (not restorable), through OrderFailed.
	testenv.WaitFor(t, 30*time.Second, "10 OrderCreated and 90 OrderFailed", func() bool {
		return len(s.received(&waitingroomv1.OrderCreated{})) == 10 && len(s.received(&waitingroomv1.OrderFailed{})) == 90
	})
	for _, d := range s.received(&waitingroomv1.OrderFailed{}) {
		var ev waitingroomv1.OrderFailed
		if err := proto.Unmarshal(d.Body, &ev); err != nil || ev.GetRestorable() || ev.GetReason() != waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_SOLD_OUT {
			t.Fatalf("OrderFailed %v %v, want SOLD_OUT, not restorable", &ev, err)
		}
	}
}

func TestForeignTokenIsRefusedAndEarlyTokenIsTooEarly(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.product("p1", 5)
	secrets := s.admit("alice", "bob")

	r := s.order("bob", secrets["alice"], "p1", 1)
	if r.status != http.StatusForbidden || r.problemType() != "invalid-entry-token" {
		t.Fatalf("bob with alice's token: %d %s", r.status, r.body)
	}
	if r := s.order("alice", "", "p1", 1); r.status != http.StatusForbidden {
		t.Fatalf("no token: %d", r.status)
	}
	// Nothing changed: alice's token still works, stock untouched until then.
	if st := s.stock("p1"); st != 5 {
		t.Fatalf("stock %d after refused orders, want 5", st)
	}
	if r := s.order("alice", secrets["alice"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("alice's own order: %d %s", r.status, r.body)
	}

	// A token whose activate-at lies ahead: 425 with Retry-After, not consumed.
	ctx := context.Background()
	bobs := redisstore.KeysFor(s.q).Status("bob")
	tok, seq, held := redisstore.ParseTokenMarker(s.store.Client().Get(ctx, bobs).Val())
	if !held {
		t.Fatal("bob holds no token")
	}
	tok.ActivateAt = time.Now().Add(3 * time.Second)
	s.store.Client().Set(ctx, bobs, redisstore.TokenMarker(tok, seq), redis.KeepTTL)
	r = s.order("bob", secrets["bob"], "p1", 1)
	if r.status != http.StatusTooEarly || r.problemType() != "token-not-active" {
		t.Fatalf("early: %d %s", r.status, r.body)
	}
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < 1 || ra > 3 {
		t.Fatalf("Retry-After %q, want 1..3", r.header.Get("Retry-After"))
	}
	if st, _ := s.store.Position(ctx, s.q, "bob"); st.State != queue.Admitted || st.Token == nil {
		t.Fatalf("bob after 425: %+v, want his token untouched", st)
	}
}

func TestDatabaseDownFailsRestorablyAndTheTokenComesBack(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{pgProxy: true})
	s.restorer()
	s.product("p1", 5)
	secret := s.admit("carol")["carol"]
	ctx := context.Background()
	before, _ := s.store.Position(ctx, s.q, "carol")

	s.pgProxy.Cut()
	r := s.order("carol", secret, "p1", 1)
	if r.status != http.StatusServiceUnavailable || r.problemType() != "backend-unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("order with the database cut: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, 30*time.Second, "OrderFailed and the token restored", func() bool {
		st, err := s.store.Position(ctx, s.q, "carol")
		return err == nil && st.State == queue.Admitted && st.Token != nil && !st.Ordering
	})
	// The test's listener has its own queue: it may see the event after the restorer did.
	testenv.WaitFor(t, 30*time.Second, "the OrderFailed event on the listener", func() bool {
		return len(s.received(&waitingroomv1.OrderFailed{})) >= 1
	})
	var ev waitingroomv1.OrderFailed
	if fs := s.received(&waitingroomv1.OrderFailed{}); len(fs) != 1 || proto.Unmarshal(fs[0].Body, &ev) != nil ||
		!ev.GetRestorable() || ev.GetReason() != waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_DATABASE_ERROR {
		t.Fatalf("OrderFailed events: %d %v", len(fs), &ev)
	}
	after, _ := s.store.Position(ctx, s.q, "carol")
	if !after.Token.ExpiresAt.Equal(before.Token.ExpiresAt) || after.Token.Secret != secret {
		t.Fatalf("restored token %+v, want the same token with its original expiry %v", after.Token, before.Token.ExpiresAt)
	}
	s.pgProxy.Restore()
	testenv.WaitFor(t, 30*time.Second, "a retry to succeed", func() bool { return s.order("carol", secret, "p1", 1).status == http.StatusCreated })
	if st := s.stock("p1"); st != 4 {
		t.Fatalf("stock %d, want 4", st)
	}
}

func TestReaperRestoresAbandonedAndSettlesCommitted(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{lease: 900 * time.Millisecond, txTimeout: 300 * time.Millisecond})
	s.restorer()
	s.product("p1", 5)
	secrets := s.admit("dies-before-commit", "dies-after-commit")
	ctx := context.Background()

	// The process consumed the token and died before its transaction.
	if _, err := s.store.Consume(ctx, s.q, "dies-before-commit", secrets["dies-before-commit"], "order-lost", 900*time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The process committed the order and died before settling.
	c, err := s.store.Consume(ctx, s.q, "dies-after-commit", secrets["dies-after-commit"], "order-kept", 900*time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.commitDirectly("order-kept", "dies-after-commit", c.TokenID); r != nil {
		t.Fatal(r)
	}
	// A token of a queue this database sells nothing in, consumed by another
	// order-service (with another database) whose transaction is running
	// long: not this reaper's to judge.
	foreign := s.q + "-elsewhere"
	s.configure(foreign)
	fsecret := s.admitIn(foreign, s.lease(foreign), "buys-elsewhere")["buys-elsewhere"]
	if _, err := s.store.Consume(ctx, foreign, "buys-elsewhere", fsecret, "order-elsewhere", 900*time.Millisecond, time.Minute); err != nil {
		t.Fatal(err)
	}
	foreignDue := time.Now().Add(900 * time.Millisecond)

	testenv.WaitFor(t, 30*time.Second, "the abandoned token restored", func() bool {
		st, err := s.store.Position(ctx, s.q, "dies-before-commit")
		return err == nil && st.State == queue.Admitted && st.Token != nil && !st.Ordering
	})
	testenv.WaitFor(t, 30*time.Second, "the committed order settled", func() bool {
		st, err := s.store.Position(ctx, s.q, "dies-after-commit")
		return err == nil && st.State == queue.Ordered
	})
	testenv.WaitFor(t, 30*time.Second, "the OrderFailed event on the listener", func() bool {
		return len(s.received(&waitingroomv1.OrderFailed{})) >= 1
	})
	var ev waitingroomv1.OrderFailed
	fs := s.received(&waitingroomv1.OrderFailed{})
	if len(fs) != 1 || proto.Unmarshal(fs[0].Body, &ev) != nil || ev.GetReason() != waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_ABANDONED ||
		!ev.GetRestorable() || ev.GetOrderId() != "order-lost" {
		t.Fatalf("OrderFailed: %d events, first %v", len(fs), &ev)
	}
	// Ten reaper passes after the foreign lease ran out, it is untouched.
	time.Sleep(time.Until(foreignDue.Add(10 * s.cfg.ReapInterval)))
	if st, err := s.store.Position(ctx, foreign, "buys-elsewhere"); err != nil || st.State != queue.Admitted || !st.Ordering {
		t.Fatalf("the other database's in-flight token: %+v %v, want ADMITTED and ordering", st, err)
	}
	if over, err := s.store.Overdue(ctx, foreign, 10); err != nil || len(over) != 1 || over[0].OrderID != "order-elsewhere" {
		t.Fatalf("the other database's overdue lease: %+v %v, want it still there for its owner", over, err)
	}
	// No second order with the settled token; the restored one orders fine.
	if r := s.order("dies-after-commit", secrets["dies-after-commit"], "p1", 1); r.status != http.StatusForbidden {
		t.Fatalf("second order with a settled token: %d %s", r.status, r.body)
	}
	if r := s.order("dies-before-commit", secrets["dies-before-commit"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("order with the restored token: %d %s", r.status, r.body)
	}
}

func TestBrokerDownOrdersStillSucceedAndEventsFollow(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{amqpProxy: true})
	s.product("p1", 100)
	users := make([]string, 20)
	for i := range users {
		users[i] = fmt.Sprintf("u%02d", i)
	}
	secrets := s.admit(users...)
	s.amqpProxy.Cut()
	for _, u := range users {
		if r := s.order(u, secrets[u], "p1", 1); r.status != http.StatusCreated {
			t.Fatalf("order by %s with the broker down: %d %s", u, r.status, r.body)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(s.received(&waitingroomv1.OrderCreated{})); n != 0 {
		t.Fatalf("%d OrderCreated arrived through a cut link", n)
	}
	s.amqpProxy.Restore()
	testenv.WaitFor(t, 30*time.Second, "all 20 OrderCreated", func() bool { return len(uniqueIDs(s.received(&waitingroomv1.OrderCreated{}))) == 20 })
	t.Logf("broker down for 20 orders: all 20 OrderCreated arrived after it came back, %d deliveries (duplicates allowed)", len(s.received(&waitingroomv1.OrderCreated{})))
}

func TestIdempotencyKeyReplaysTheFirstAnswer(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	s.product("p1", 10)
	secret := s.admit("dan")["dan"]
	first := s.order("dan", secret, "p1", 2, "Idempotency-Key", "k-1")
	second := s.order("dan", secret, "p1", 2, "Idempotency-Key", "k-1")
	if first.status != http.StatusCreated || second.status != http.StatusCreated || string(first.body) != string(second.body) {
		t.Fatalf("first %d %s, replay %d %s", first.status, first.body, second.status, second.body)
	}
	if second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("replay not marked")
	}
	if st := s.stock("p1"); st != 8 {
		t.Fatalf("stock %d, want 8: the replay must create nothing", st)
	}
	var o struct{ OrderID string }
	_ = json.Unmarshal(first.body, &o)
	if r := s.do(http.MethodGet, "/api/v1/orders/"+o.OrderID, s.token("dan", ""), "", nil); r.status != http.StatusOK {
		t.Fatalf("owner reads the order: %d", r.status)
	}
	if r := s.do(http.MethodGet, "/api/v1/orders/"+o.OrderID, s.token("eve", ""), "", nil); r.status != http.StatusNotFound {
		t.Fatalf("someone else reads the order: %d, want 404", r.status)
	}
}

func TestRateLimitedOrderLeavesTheTokenUsable(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{rateLimit: 1})
	s.product("p1", 10)
	secrets := s.admit("a", "b")
	if r := s.order("a", secrets["a"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("first order: %d %s", r.status, r.body)
	}
	r := s.order("b", secrets["b"], "p1", 1)
	if r.status != http.StatusTooManyRequests || r.problemType() != "rate-limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("second order within the second: %d %s", r.status, r.body)
	}
	if st, _ := s.store.Position(context.Background(), s.q, "b"); st.Token == nil || st.Ordering {
		t.Fatalf("b's token after 429: %+v, want untouched", st)
	}
	testenv.WaitFor(t, 5*time.Second, "b's order after the limit", func() bool { return s.order("b", secrets["b"], "p1", 1).status == http.StatusCreated })
}

func TestRetentionJobDeletesOldEventsAndKeys(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{retention: time.Hour})
	s.product("p1", 10)
	secret := s.admit("fay")["fay"]
	if r := s.order("fay", secret, "p1", 1, "Idempotency-Key", "fresh-key"); r.status != http.StatusCreated {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, 10*time.Second, "the OrderCreated event", func() bool { return len(s.received(&waitingroomv1.OrderCreated{})) == 1 })

	raw, err := sql.Open("pgx", s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// Rows from two hours ago, as if the service had run then.
	if _, err := raw.Exec(`INSERT INTO outbox (event_id, routing_key, type, payload, occurred_at, created_at, sent_at)
		SELECT 'old-' || g, 'order.created', 't', '', now() - interval '2 hours', now() - interval '2 hours', now() - interval '2 hours'
		FROM generate_series(1, 40) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO idempotency (user_id, key, status, body, created_at)
		SELECT 'old-' || g, 'k', 201, '{}'::bytea, now() - interval '2 hours' FROM generate_series(1, 30) g`); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := raw.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.WaitFor(t, 10*time.Second, "the old rows deleted", func() bool {
		return count(`SELECT count(*) FROM outbox WHERE event_id LIKE 'old-%'`) == 0 && count(`SELECT count(*) FROM idempotency WHERE user_id LIKE 'old-%'`) == 0
	})
	// This hour's order, its event and its key stay.
	if n := count(`SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d outbox rows, want this hour's one OrderCreated", n)
	}
	if n := count(`SELECT count(*) FROM idempotency`); n != 1 {
		t.Fatalf("%d idempotency rows, want this hour's one key", n)
	}
	r := s.getOps("/metrics")
	for table, want := range map[string]string{"outbox": "40", "idempotency": "30"} {
		sample := `waitingroom_orders_retention_deleted_rows_total{table="` + table + `"} ` + want + "\n"
		if !strings.Contains(string(r.body), sample) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(sample))
		}
	}
}
