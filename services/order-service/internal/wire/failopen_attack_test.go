package wire

// Fail-open that outsiders cannot trigger (issue 26, finding 1): a queue
// that fails OPEN lets orders through without Redis only while this
// replica's own probe finds Redis down, and then only for signed entry
// tokens. These tests reproduce the two ways the finding got junk orders
// bypassed while Redis was healthy: a token check held on the way, and
// the service's own connection pool used up by load.

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// A junk-token order whose token check is held 2.5 s on the way to Redis
// (both of go-redis's tries), Redis itself healthy: 503 with Retry-After,
// never a bypassed order (the finding: 201 with bypassed=true for
// quantity 10). Meanwhile an admitted buyer orders as usual.
func TestHeldTokenCheckBypassesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{redisProxy: true, queue: failOpen})
	s.product("p1", 100)
	k := redisstore.KeysFor(s.q)
	const rounds = 3
	for round := range rounds {
		user := fmt.Sprintf("mallory-%d", round)
		s.redisProxy.DelayRequests(func(req []byte) bool { return bytes.Contains(req, []byte(k.Token(user))) }, 2500*time.Millisecond, 2)
		r := s.order(user, fmt.Sprintf("%032x", round+1), "p1", 10)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("round %d: junk order under a held check: %d %s (Retry-After %q), want 503 with Retry-After", round, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	buyer := s.admit("buyer")["buyer"]
	if r := s.order("buyer", buyer, "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("the admitted buyer's order: %d %s", r.status, r.body)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE bypassed`); n != 0 {
		t.Fatalf("%d bypassed orders, want 0", n)
	}
	if st := s.stock("p1"); st != 99 {
		t.Fatalf("stock %d, want 99 (the buyer's one)", st)
	}
	t.Logf("%d junk orders under a held token check: 503 each, %d requests delayed, 0 bypassed", rounds, s.redisProxy.Delayed())
}

// The order-service's pool cut to 2 connections with a 20 ms pool timeout,
// every Redis round trip 30 ms slow (through a proxy: without it an idle
// machine answered fast enough to never use the pool up, and the test
// found no 503 in 1 run of 4), 300 junk-token orders from 300 logins at
// once, three times: the pool times out (some 503s, each with
// Retry-After), Redis stays healthy, and no order is bypassed: every
// answer is 403, 429 or 503 (the finding: 21 bypassed orders from a flood
// that used the pool up).
func TestPoolUsedUpByLoadBypassesNothing(t *testing.T) {
	// Not parallel: 300 requests at once would starve the package's
	// other tests of CPU (as the junk floods, junk_test.go).
	s := newStack(t, stackOptions{redisProxy: true, redisQuery: "pool_size=2&pool_timeout=20ms", queue: failOpen})
	s.product("p1", 1000)
	s.redisProxy.Delay(30 * time.Millisecond)
	by := map[string]int{}
	var errs []error
	for round := range 3 {
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		start := make(chan struct{})
		for i := range 300 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r := s.order(fmt.Sprintf("flood-%d-%03d", round, i), fmt.Sprintf("%032x", i+1), "p1", 10)
				mu.Lock()
				defer mu.Unlock()
				if r.status < 0 {
					errs = append(errs, fmt.Errorf("order %d/%d: %s", round, i, r.body))
					return
				}
				if r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "" {
					errs = append(errs, fmt.Errorf("order %d/%d: 503 without Retry-After", round, i))
				}
				by[strconv.Itoa(r.status)]++
			}()
		}
		close(start)
		wg.Wait()
	}
	if len(errs) > 0 {
		t.Fatalf("%d requests failed, first: %v", len(errs), errs[0])
	}
	if by["503"] == 0 || by["403"]+by["429"]+by["503"] != 900 {
		t.Fatalf("answers %v, want 900 of 403, 429 and 503, some 503 (the pool used up)", by)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders (bypassed or not) from junk tokens, want 0", n)
	}
	t.Logf("900 junk orders on a 2-connection pool: %v, 0 orders", by)
}

// A genuine outage: the order-service's link to Redis cut for 10 s (Redis
// itself up, keeping the line). Once the service's probe finds Redis down,
// the admitted buyers of a queue that fails OPEN order with their signed
// tokens and made-up tokens are refused; when the link is back, tokens are
// checked in Redis again: a token used during the cut cannot order again
// (409 token-already-used), and a buyer who waited orders as usual.
func TestRedisCutTenSecondsTokenHoldersStillOrder(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{redisProxy: true, queue: failOpen})
	s.product("p1", 100)
	users := []string{"ann", "bob", "cid", "dee", "eve", "fay"}
	tokens := s.admit(users...)
	s.redisProxy.Cut()
	cut := time.Now()
	// Until the probe decides, the order is 503 and nothing is written.
	var bypassedAfter time.Duration
	for {
		r := s.order("ann", tokens["ann"], "p1", 1)
		if r.status == http.StatusCreated {
			bypassedAfter = time.Since(cut)
			break
		}
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("ann's order %v into the cut: %d %s, want 503 with Retry-After until the outage is decided", time.Since(cut), r.status, r.body)
		}
		if time.Since(cut) > 8*time.Second {
			t.Fatalf("still no bypass %v into the cut", time.Since(cut))
		}
		time.Sleep(200 * time.Millisecond)
	}
	by := map[string]int{}
	for _, u := range []string{"bob", "cid", "dee"} {
		r := s.order(u, tokens[u], "p1", 1)
		by[strconv.Itoa(r.status)+" "+r.problemType()]++
	}
	for i, secret := range junk(5) {
		r := s.order(fmt.Sprintf("mallory-%d", i), secret, "p1", 1)
		by[strconv.Itoa(r.status)+" "+r.problemType()]++
	}
	if by["201 "] != 3 || by["403 invalid-entry-token"] != 5 || len(by) != 2 {
		t.Fatalf("during the cut: %v, want 3 201 (bob, cid, dee) and 5 403", by)
	}
	if rest := 10*time.Second - time.Since(cut); rest > 0 {
		time.Sleep(rest)
	}
	s.redisProxy.Restore()
	back := time.Now()
	// While bypassing, ann's second order is over her one order (409
	// order-limit-reached); checked in Redis again, her token is consumed
	// and found used (409 token-already-used).
	testenv.WaitFor(t, 10*time.Second, "tokens checked in Redis again", func() bool {
		return s.order("ann", tokens["ann"], "p1", 1).problemType() == "token-already-used"
	})
	if r := s.order("bob", tokens["bob"], "p1", 1); r.status != http.StatusConflict || r.problemType() != "token-already-used" {
		t.Fatalf("bob's token again after the cut: %d %s, want 409 token-already-used", r.status, r.body)
	}
	if r := s.order("eve", tokens["eve"], "p1", 1); r.status != http.StatusCreated {
		t.Fatalf("eve, who waited out the cut: %d %s", r.status, r.body)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE bypassed`); n != 4 {
		t.Fatalf("%d bypassed orders, want 4 (ann, bob, cid, dee)", n)
	}
	if n := s.queryInt(`SELECT count(*) FROM orders WHERE NOT bypassed AND user_id = 'eve'`); n != 1 {
		t.Fatalf("%d orders of eve checked in Redis, want 1", n)
	}
	t.Logf("link to Redis cut 10 s: bypassing %v into it; during it %v; tokens checked in Redis again %v after it", bypassedAfter.Round(time.Millisecond), by, time.Since(back).Round(time.Millisecond))
}
