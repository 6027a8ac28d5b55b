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
// order-service bypasses: an order with a signed token for a product that
// does not exist is refused as unavailable (503) until the service's probe
// finds Redis down, and, bypassed, as product-not-found (400) then. It
// returns how long that took.
func (s *stack) killRedis() time.Duration {
	s.t.Helper()
	probe := s.signed(1)[0]
	s.redis.Stop()
	start := time.Now()
	testenv.WaitFor(s.t, 10*time.Second, "the order-service bypasses", func() bool {
		return s.order("probe", probe, "no-such-product", 1).problemType() == "product-not-found"
	})
	return time.Since(start)
}

// signed makes n entry tokens signed for the stack's queue now, as the
// dispatcher would (not issued through Redis: while it is down, the
// signature is all the order-service can check).
func (s *stack) signed(n int) []string {
	s.t.Helper()
	gs, err := entrySigner(s.t).Grants(s.q, 0, n, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]string, n)
	for i, g := range gs {
		out[i] = g.Secret
	}
	return out
}

// orders sends one order per secret at once, user prefix-00.. for the
// first; it returns the answers by status (and problem type) and every
// request's failure to get an answer.
func (s *stack) orders(prefix, product string, secrets []string) (map[string]int, []error) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		by     = map[string]int{}
		errs   []error
		starts = make(chan struct{})
	)
	for i, secret := range secrets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-starts
			r := s.order(fmt.Sprintf("%s-%02d", prefix, i), secret, product, 1)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status < 0:
				errs = append(errs, fmt.Errorf("order %d: %s", i, r.body))
			case (r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable) && r.header.Get("Retry-After") == "":
				errs = append(errs, fmt.Errorf("order %d: %d without Retry-After", i, r.status))
			}
			by[strconv.Itoa(r.status)+" "+r.problemType()]++
		}()
	}
	close(starts)
	wg.Wait()
	return by, errs
}

// junk is n made-up entry tokens.
func junk(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%032x", i+1)
	}
	return out
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

// TestBypassWhileRedisIsDown: a queue that fails OPEN, stock 10, its Redis
// killed: 15 buyers admitted before (signed tokens) and 15 with made-up
// tokens order at once: 10 orders (201) and 5 sold-out (409) for the
// admitted, 403 for every made-up token; the stock is 0, never below; the
// 10 orders are bypassed, with their tokens' ids, and announced as
// bypassed OrderCreated; no OrderFailed. When Redis is back (empty, its
// queue configured again) the line resumes: a signed token Redis does not
// know is refused (403), and an admitted buyer's token makes an order that
// is not bypassed.
func TestBypassWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: failOpen})
	s.product("p1", 10)
	s.product("p2", 5)
	users := make([]string, 15)
	for i := range users {
		users[i] = fmt.Sprintf("buyer-%02d", i)
	}
	admitted := s.admit(users...)
	took := s.killRedis()

	secrets := make([]string, 0, 30)
	for _, u := range users {
		secrets = append(secrets, admitted[u])
	}
	secrets = append(secrets, junk(15)...)
	by, errs := s.orders("buyer", "p1", secrets)
	if len(errs) > 0 {
		t.Fatalf("requests failed: %v", errs)
	}
	if by["201 "] != 10 || by["409 sold-out"] != 5 || by["403 invalid-entry-token"] != 15 || len(by) != 3 {
		t.Fatalf("answers %v, want 10 201, 5 409 sold-out and 15 403 invalid-entry-token", by)
	}
	if st := s.stock("p1"); st != 0 {
		t.Fatalf("stock %d, want 0", st)
	}
	ids := map[string]bool{}
	for _, u := range users {
		v, err := entrySigner(t).Check(s.q, admitted[u])
		if err != nil {
			t.Fatal(err)
		}
		ids[v.TokenID] = true
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE queue_id = $1 AND bypassed AND user_id LIKE 'buyer-%' AND entry_token_id NOT LIKE 'bypass-%'`, s.q); n != 10 {
		t.Fatalf("%d bypassed orders with their tokens' ids, want 10", n)
	}
	if n := s.queryInt(`SELECT count(DISTINCT entry_token_id) FROM orders WHERE queue_id = $1 AND bypassed`, s.q); n != 10 {
		t.Fatalf("%d distinct token ids among the bypassed orders, want 10", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM outbox WHERE routing_key = 'order.created'`); n != 10 {
		t.Fatalf("%d OrderCreated in the outbox, want 10", n)
	}
	testenv.WaitFor(t, 10*time.Second, "10 OrderCreated", func() bool { return len(s.createdEvents()) == 10 })
	for _, ev := range s.createdEvents() {
		if !ev.GetBypassed() || !ids[ev.GetTokenId()] {
			t.Fatalf("OrderCreated %v, want bypassed with an admitted buyer's token id", ev)
		}
	}
	if got := s.requests("bypassed"); got != 10 {
		t.Fatalf("/metrics: %d bypassed, want 10", got)
	}
	if got := s.requests("sold_out"); got != 5 {
		t.Fatalf("/metrics: %d sold_out, want 5", got)
	}

	// Redis is back, empty: the queue is configured again (the dispatcher
	// would) and the service stops bypassing within a refresh.
	s.redis.Start()
	s.configure(s.q)
	back := time.Now()
	unknown := s.signed(1)[0]
	testenv.WaitFor(t, 5*time.Second, "a signed token Redis does not know refused again", func() bool {
		return s.order("probe", unknown, "no-such-product", 1).problemType() == "invalid-entry-token"
	})
	resumed := time.Since(back)
	if resumed > 2500*time.Millisecond {
		t.Fatalf("tokens checked in Redis again %v after it came back, want within the cache's second (and a refresh)", resumed)
	}
	s.lead = s.lease(s.q)
	r := s.order("late", s.admit("late")["late"], "p2", 1)
	if r.status != http.StatusCreated {
		t.Fatalf("an admitted buyer's order after the outage: %d %s", r.status, r.body)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE queue_id = $1 AND NOT bypassed AND user_id = 'late'`, s.q); n != 1 {
		t.Fatalf("%d orders of late not bypassed, want 1", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE queue_id = $1`, s.q); n != 11 {
		t.Fatalf("%d orders, want 11", n)
	}
	if n := len(s.received(&waitingroomv1.OrderFailed{})); n != 0 {
		t.Fatalf("%d OrderFailed, want none", n)
	}
	t.Logf("bypassing %v after Redis was killed; 30 orders at once: %v; tokens checked in Redis again %v after it came back", took, by, resumed)
}

// TestBypassHeldToTheAdmissionRate: at an admission rate of 5/s the
// replica's bucket holds 2 (a tenth of a second, plus one): of 20 signed
// orders at once at most 2 (and what the time they took refilled) are
// created, the others are refused 429 with Retry-After, before any stock
// is taken.
func TestBypassHeldToTheAdmissionRate(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: func(c *queue.Config) {
		c.FailMode, c.AdmissionRatePerSec = queue.FailOpen, 5
	}})
	s.product("p1", 100)
	s.killRedis()
	time.Sleep(time.Second) // the probes' share of the bucket comes back

	start := time.Now()
	by, errs := s.orders("burst", "p1", s.signed(20))
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
// with Retry-After to every order while its Redis is down, with a signed
// token, a made-up one or none, writing nothing; when Redis is back,
// orders without a token are refused (403) and a token makes an order
// again.
func TestClosedQueueWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true})
	s.product("p1", 10)
	carol := s.admit("carol")["carol"]
	s.redis.Stop()
	for _, secret := range []string{carol, fmt.Sprintf("%032x", 7), ""} {
		testenv.WaitFor(t, 10*time.Second, "503 for an order with token "+secret, func() bool {
			r := s.order("carol", secret, "p1", 1, "Idempotency-Key", "k-"+secret)
			return r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != ""
		})
	}
	if r := s.order("carol", carol, "p1", 1); r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("order with carol's token: %d %s (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
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
// against maxOrdersPerUser (1: of 3 orders at once, each with a token of
// its own, one is created, two are 409 order-limit-reached), a token
// orders once (a second person showing it: 409 token-already-used), and
// an Idempotency-Key still replays its answer.
func TestBypassKeepsOrderLimitAndIdempotency(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: func(c *queue.Config) {
		c.FailMode, c.MaxOrdersPerUser = queue.FailOpen, 1
	}})
	s.product("p1", 10)
	s.killRedis()

	var wg sync.WaitGroup
	answers := make([]response, 3)
	daves := s.signed(3)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = s.order("dave", daves[i], "p1", 1)
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
	var used string
	for i, r := range answers {
		if r.status == http.StatusCreated {
			used = daves[i]
		}
	}
	if r := s.order("frank", used, "p1", 1); r.status != http.StatusConflict || r.problemType() != "token-already-used" {
		t.Fatalf("frank with dave's used token: %d %s, want 409 token-already-used", r.status, r.body)
	}

	erins := s.signed(1)[0]
	first := s.order("erin", erins, "p1", 2, "Idempotency-Key", "erin-1")
	again := s.order("erin", erins, "p1", 2, "Idempotency-Key", "erin-1")
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

// TestBypassDefaultsToOneOrderPerPerson: a queue that fails OPEN and sets
// no maxOrdersPerUser: while Redis is down FAIL_OPEN_MAX_ORDERS_PER_USER
// (1) holds, so one person with 5 signed tokens gets 1 order.
func TestBypassDefaultsToOneOrderPerPerson(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{privateRedis: true, queue: failOpen})
	s.product("p1", 10)
	s.killRedis()
	by := map[string]int{}
	for _, secret := range s.signed(5) {
		r := s.order("gina", secret, "p1", 1)
		by[strconv.Itoa(r.status)+" "+r.problemType()]++
	}
	if by["201 "] != 1 || by["409 order-limit-reached"] != 4 {
		t.Fatalf("gina's 5 orders: %v, want one 201 and four 409 order-limit-reached", by)
	}
}
