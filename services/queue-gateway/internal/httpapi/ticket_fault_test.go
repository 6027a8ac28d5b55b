package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestTicketPollsWhenRedisIsSlowOrGone: the frontier answers only while it
// is fresh. With every Redis reply 1.5 s late (past the client's 1 s read
// timeout) the frontier goes stale and ticket polls get 503 with
// Retry-After, not an old place; once replies are prompt again they are
// answered from memory. When Redis dies the same; when it comes back empty
// and the queue is created again under the same id, an old ticket names the
// old queue's generation and the store answers: NOT_IN_QUEUE.
func TestTicketPollsWhenRedisIsSlowOrGone(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	proxy := testenv.StartProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	h := newHarness(t, withRedisURL("redis://"+proxy.Addr()+"/0"))
	q := h.newQueueWithID(testenv.ID(t), map[string]any{"admissionRatePerSec": 10})
	tickets := h.fillLine(q, 100)
	fresh := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			front := h.reads("frontier")
			r, st := h.pollWith(q, userID(80), tickets[80])
			if r.status == http.StatusOK && st.Position == 81 && h.reads("frontier") == front+1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no answer from the frontier within 5 s (last %d %s)", what, r.status, r.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	fresh("at the start")

	// Slow: every reply 1.5 s late.
	proxy.Delay(1500 * time.Millisecond)
	time.Sleep(3300 * time.Millisecond) // the frontier's last read is older than MaxAge, 3 s
	slowAt := time.Now()
	r, _ := h.pollWith(q, userID(80), tickets[80])
	r.problem(t, http.StatusServiceUnavailable, "backend-unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	t.Logf("Redis 1.5 s late: a ticket poll got 503 in %s", time.Since(slowAt).Round(time.Millisecond))
	proxy.Delay(0)
	fresh("after the replies are prompt again")

	// Gone, then back empty: the queue is created again under the same id.
	srv.Stop()
	time.Sleep(3200 * time.Millisecond)
	r, _ = h.pollWith(q, userID(80), tickets[80])
	r.problem(t, http.StatusServiceUnavailable, "backend-unavailable")
	srv.Start()
	h.newQueueWithID(q, map[string]any{"admissionRatePerSec": 10})
	for i := range 100 {
		if r, st, err := h.enter(q, fmt.Sprintf("new-%03d", i)); err != nil || st.State != "WAITING" {
			t.Fatalf("enter into the re-created queue: %v %d %s", err, r.status, r.body)
		}
	}
	time.Sleep(300 * time.Millisecond) // a fresh frontier of the new queue
	store0 := h.reads("store")
	r, st := h.pollWith(q, userID(80), tickets[80])
	if r.status != http.StatusOK || st.State != "NOT_IN_QUEUE" || h.reads("store") != store0+1 {
		t.Fatalf("an old ticket in the re-created queue: %d %s (store reads %d -> %d)", r.status, r.body, store0, h.reads("store"))
	}
}
