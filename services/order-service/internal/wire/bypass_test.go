package wire

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// failOpen makes the stack's queue fail OPEN.
func failOpen(c *queue.Config) { c.FailMode = queue.FailOpen }

// killRedis stops the stack's own redis-server and waits until the
// order-service bypasses: an order without a token for a product that does
// not exist is refused as invalid-entry-token (403) while the service
// believes Redis is up, and, bypassed, as product-not-found (400) once its
// configuration cache failed to reach Redis. It returns how long that took.
func (s *stack) killRedis() time.Duration {
	s.t.Helper()
	s.redis.Stop()
	start := time.Now()
	testenv.WaitFor(s.t, 5*time.Second, "the order-service bypasses", func() bool {
		return s.order("probe", "", "no-such-product", 1).problemType() == "product-not-found"
	})
	return time.Since(start)
}

// orders sends n orders at once, one per user prefix-00.., without an entry
// token for the even ones and with a made-up one for the odd ones; it
// returns the answers by status (and problem type) and every request's
// failure to get an answer.
func (s *stack) orders(prefix, product string, n int) (map[string]int, []error) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		by     = map[string]int{}
		errs   []error
		starts = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			secret := ""
			if i%2 == 1 {
				secret = fmt.Sprintf("%032x", i) // a token Redis cannot check now
			}
			<-starts
			r := s.order(fmt.Sprintf("%s-%02d", prefix, i), secret, product, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status < 0:
				errs = append(errs, fmt.Errorf("order %d: %s", i, r.body))
			case r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "":
				errs = append(errs, fmt.Errorf("order %d: 429 without Retry-After", i))
			}
			by[strconv.Itoa(r.status)+" "+r.problemType()]++
		}()
	}
	close(starts)
	wg.Wait()
	return by, errs
}

// requests reads waitingroom_orders_requests_total for outcome.
func (s *stack) requests(outcome string) int {
	s.t.Helper()
	prefix := `waitingroom_orders_requests_total{outcome="` + outcome + `"} `
	for _, line := range strings.Split(string(s.getOps("/metrics").body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				s.t.Fatalf("/metrics: %s", line)
			}
			return n
		}
	}
	return 0
}

// createdEvents decodes every OrderCreated received so far.
func (s *stack) createdEvents() []*waitingroomv1.OrderCreated {
	s.t.Helper()
	var out []*waitingroomv1.OrderCreated
	seen := map[string]bool{}
	for _, d := range s.received(&waitingroomv1.OrderCreated{}) {
		var ev waitingroomv1.OrderCreated
		if err := proto.Unmarshal(d.Body, &ev); err != nil {
			s.t.Fatal(err)
		}
		if !seen[ev.GetEventId()] {
			seen[ev.GetEventId()] = true
			out = append(out, &ev)
		}
	}
	return out
}

// TestBypassWhileRedisIsDown: a queue that fails OPEN, stock 20, its Redis
// killed: 30 buyers at once, half without a token and half with one Redis
// cannot check, get exactly 20 orders (201) and 10 sold-out (409); the stock
// is 0, never below; the 20 orders are bypassed, with token ids of their
// own, and announced as bypassed OrderCreated; no OrderFailed. When Redis is
// back (empty, its queue configured again) the line resumes: an order
// without a token is refused (403) again, and an admitted buyer's token
// makes an order that is not bypassed.
func TestBypassWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: failOpen})
	s.product("p1", 20)
	s.product("p2", 5)
	took := s.killRedis()

	by, errs := s.orders("buyer", "p1", 30)
	if len(errs) > 0 {
		t.Fatalf("requests failed: %v", errs)
	}
	if by["201 "] != 20 || by["409 sold-out"] != 10 || len(by) != 2 {
		t.Fatalf("answers %v, want 20 201 and 10 409 sold-out", by)
	}
	if st := s.stock("p1"); st != 0 {
		t.Fatalf("stock %d, want 0", st)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE queue_id = $1 AND bypassed AND entry_token_id = 'bypass-' || id`, s.q); n != 20 {
		t.Fatalf("%d bypassed orders with token id bypass-<id>, want 20", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM outbox WHERE routing_key = 'order.created'`); n != 20 {
		t.Fatalf("%d OrderCreated in the outbox, want 20", n)
	}
	testenv.WaitFor(t, 10*time.Second, "20 OrderCreated", func() bool { return len(s.createdEvents()) == 20 })
	for _, ev := range s.createdEvents() {
		if !ev.GetBypassed() || ev.GetTokenId() != "bypass-"+ev.GetOrderId() {
			t.Fatalf("OrderCreated %v, want bypassed with token id bypass-<order id>", ev)
		}
	}
	if got := s.requests("bypassed"); got != 20 {
		t.Fatalf("/metrics: %d bypassed, want 20", got)
	}
	if got := s.requests("sold_out"); got != 10 {
		t.Fatalf("/metrics: %d sold_out, want 10", got)
	}

	// Redis is back, empty: the queue is configured again (the dispatcher
	// would) and the service stops bypassing within a refresh.
	s.redis.Start()
	s.configure(s.q)
	back := time.Now()
	testenv.WaitFor(t, 5*time.Second, "an order without a token refused again", func() bool {
		return s.order("probe", "", "no-such-product", 1).problemType() == "invalid-entry-token"
	})
	resumed := time.Since(back)
	if resumed > 2500*time.Millisecond {
		t.Fatalf("tokens required again %v after Redis came back, want within the cache's second (and a refresh)", resumed)
	}
	s.lead = s.lease(s.q)
	r := s.order("late", s.admit("late")["late"], "p2", 1)
	if r.status != http.StatusCreated {
		t.Fatalf("an admitted buyer's order after the outage: %d %s", r.status, r.body)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE queue_id = $1 AND NOT bypassed AND user_id = 'late'`, s.q); n != 1 {
		t.Fatalf("%d orders of late not bypassed, want 1", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE queue_id = $1`, s.q); n != 21 {
		t.Fatalf("%d orders, want 21", n)
	}
	testenv.WaitFor(t, 10*time.Second, "21 OrderCreated", func() bool { return len(s.createdEvents()) == 21 })
	var plain int
	for _, ev := range s.createdEvents() {
		if !ev.GetBypassed() {
			plain++
		}
	}
	if plain != 1 {
		t.Fatalf("%d OrderCreated not bypassed, want late's alone", plain)
	}
	if n := len(s.received(&waitingroomv1.OrderFailed{})); n != 0 {
		t.Fatalf("%d OrderFailed, want none", n)
	}
	t.Logf("bypassing %v after Redis was killed; 30 orders at once: %v; tokens required again %v after it came back", took, by, resumed)
}

// TestBypassHeldToTheAdmissionRate: at an admission rate of 5/s the
// replica's bucket holds 2 (a tenth of a second, plus one): of 20 orders at
// once at most 2 (and what the time they took refilled) are created, the
// others are refused 429 with Retry-After, before any stock is taken.
func TestBypassHeldToTheAdmissionRate(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: func(c *queue.Config) {
		c.FailMode, c.AdmissionRatePerSec = queue.FailOpen, 5
	}})
	s.product("p1", 100)
	s.killRedis()
	time.Sleep(time.Second) // the probes' share of the bucket comes back

	start := time.Now()
	by, errs := s.orders("burst", "p1", 20)
	took := time.Since(start)
	if len(errs) > 0 {
		t.Fatalf("requests failed: %v", errs)
	}
	allowed := 2 + int(took.Seconds()*5)
	if by["201 "] < 1 || by["201 "] > allowed || by["201 "]+by["429 rate-limited"] != 20 {
		t.Fatalf("answers %v in %v, want 1..%d 201 and the rest 429 rate-limited", by, took, allowed)
	}
	if st := s.stock("p1"); st != 100-by["201 "] {
		t.Fatalf("stock %d after %d orders, want %d", st, by["201 "], 100-by["201 "])
	}
	t.Logf("20 orders at once at 5/s in %v: %v", took, by)
}

// TestClosedQueueWhileRedisIsDown: a queue that fails CLOSED answers 503
// with Retry-After to every order while its Redis is down, with a token or
// without, writing nothing; when Redis is back, orders without a token are
// refused (403) and a token makes an order again.
func TestClosedQueueWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true})
	s.product("p1", 10)
	s.redis.Stop()
	// The request with a token finds Redis gone at once; the one without
	// once the configuration cache did.
	for _, secret := range []string{fmt.Sprintf("%032x", 7), ""} {
		testenv.WaitFor(t, 5*time.Second, "503 for an order with token "+secret, func() bool {
			r := s.order("carol", secret, "p1", 1, "Idempotency-Key", "k-"+secret)
			return r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != ""
		})
	}
	if r := s.order("carol", "", "p1", 1); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("order without a token: %d %s (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
	}
	if n := s.queryInt(`SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM outbox) + (SELECT count(*) FROM idempotency)`); n != 0 {
		t.Fatalf("%d rows in orders, outbox and idempotency, want none", n)
	}
	if st := s.stock("p1"); st != 10 {
		t.Fatalf("stock %d, want 10", st)
	}

	s.redis.Start()
	s.configure(s.q)
	testenv.WaitFor(t, 5*time.Second, "an order without a token refused again", func() bool {
		return s.order("carol", "", "p1", 1).problemType() == "invalid-entry-token"
	})
	s.lead = s.lease(s.q)
	if r := s.order("carol", s.admit("carol")["carol"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("carol's order after the outage: %d %s", r.status, r.body)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE NOT bypassed`); n != 1 {
		t.Fatalf("%d orders (not bypassed), want 1", n)
	}
}

// TestBypassKeepsOrderLimitAndIdempotency: bypassed orders still count
// against maxOrdersPerUser (1: of 3 orders at once one is created, two are
// 409 order-limit-reached) and an Idempotency-Key still replays its answer.
func TestBypassKeepsOrderLimitAndIdempotency(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: func(c *queue.Config) {
		c.FailMode, c.MaxOrdersPerUser = queue.FailOpen, 1
	}})
	s.product("p1", 10)
	s.killRedis()

	var wg sync.WaitGroup
	answers := make([]response, 3)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = s.order("dave", "", "p1", 1)
		}()
	}
	wg.Wait()
	by := map[string]int{}
	for _, r := range answers {
		by[strconv.Itoa(r.status)+" "+r.problemType()]++
	}
	if by["201 "] != 1 || by["409 order-limit-reached"] != 2 {
		t.Fatalf("dave's 3 orders at once: %v, want one 201 and two 409 order-limit-reached", by)
	}

	first := s.order("erin", "", "p1", 2, "Idempotency-Key", "erin-1")
	again := s.order("erin", "", "p1", 2, "Idempotency-Key", "erin-1")
	if first.status != http.StatusCreated || again.status != http.StatusCreated || string(again.body) != string(first.body) ||
		again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("erin's order and its retry: %d %s / %d %s (replayed %q)", first.status, first.body, again.status, again.body,
			again.header.Get("Idempotent-Replayed"))
	}
	if st := s.stock("p1"); st != 7 {
		t.Fatalf("stock %d, want 7 (dave 1, erin 2)", st)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE bypassed`); n != 2 {
		t.Fatalf("%d bypassed orders, want 2", n)
	}
	if n := len(s.received(&waitingroomv1.OrderFailed{})); n != 0 {
		t.Fatalf("%d OrderFailed, want none", n)
	}
}
