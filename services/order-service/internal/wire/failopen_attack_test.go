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
// 300 junk-token orders from 300 logins at once, three times: the pool
// times out (some 503s, each with Retry-After), Redis stays healthy, and
// no order is bypassed: every answer is 403, 429 or 503 (the finding: 21
// bypassed orders from a flood that used the pool up).
func TestPoolUsedUpByLoadBypassesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{redisQuery: "pool_size=2&pool_timeout=20ms", queue: failOpen})
	s.product("p1", 1000)
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
