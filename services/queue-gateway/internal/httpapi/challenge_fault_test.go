package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestProofOfWorkWhileRedisIsDown: a queue that asks for proof of work and
// fails CLOSED, its Redis cut off. A challenge cannot be fetched (503), and
// an enter with a solved one is 503 and gives no place; the solution is not
// burned by it: once Redis answers again the same solution enters once, and
// a second use of it (after leaving) is 403. One place in all.
func TestProofOfWorkWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	proxy := testenv.StartProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	h := newHarness(t, withRedisURL("redis://"+proxy.Addr()+"/0"))
	q := h.newQueueWithID(testenv.ID(t), map[string]any{"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 4})
	solution := solved(h.challenge(q, "ann"))

	proxy.Cut()
	unavailable := 0
	for _, r := range []response{
		h.must(http.MethodPost, "/api/v1/queues/"+q+"/challenge", h.token("bob", ""), nil),
		h.enterWith(q, "ann", solution),
		h.enterWith(q, "ann", solution),
	} {
		r.problem(t, http.StatusServiceUnavailable, "backend-unavailable")
		unavailable++
	}
	proxy.Restore()

	deadline := time.Now().Add(5 * time.Second)
	var r response
	for {
		if r = h.enterWith(q, "ann", solution); r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var st standing
	r.json(t, &st)
	if r.status != http.StatusOK || st.State != "WAITING" || st.Position != 1 {
		t.Fatalf("the solution's first use with Redis back: %d %s, want WAITING at 1", r.status, r.body)
	}
	if r := h.must(http.MethodDelete, "/api/v1/queues/"+q+"/position", h.token("ann", ""), nil); r.status != http.StatusNoContent {
		t.Fatalf("leave: %d %s", r.status, r.body)
	}
	h.enterWith(q, "ann", solution).problem(t, http.StatusForbidden, "challenge-failed")
	if unavailable != 3 || h.zcard(q) != 0 {
		t.Fatalf("%d answers 503 while cut off, %d in line after the reuse; want 3 and 0", unavailable, h.zcard(q))
	}
}
