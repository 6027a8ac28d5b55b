package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// issuedChallenge is the challenge document.
type issuedChallenge struct {
	Challenge      string `json:"challenge"`
	Algorithm      string `json:"algorithm"`
	DifficultyBits int    `json:"difficultyBits"`
	ExpiresAt      string `json:"expiresAt"`
	ExpiresInMs    int64  `json:"expiresInMs"`
}

func (h *harness) challenge(q, user string) issuedChallenge {
	h.t.Helper()
	r := h.must(http.MethodPost, "/api/v1/queues/"+q+"/challenge", h.token(user, ""), nil)
	if r.status != http.StatusCreated {
		h.t.Fatalf("challenge for %s in %s: %d %s", user, q, r.status, r.body)
	}
	var c issuedChallenge
	r.json(h.t, &c)
	return c
}

// solved is the X-Enter-Challenge value for a challenge, solved here.
func solved(c issuedChallenge) string {
	return c.Challenge + ":" + challenge.Solve(c.Challenge, c.DifficultyBits)
}

func (h *harness) enterWith(q, user, solution string) response {
	h.t.Helper()
	return h.must(http.MethodPost, "/api/v1/queues/"+q+"/enter", h.token(user, ""), nil, "X-Enter-Challenge", solution)
}

// A queue that asks for proof of work: no solution is 428, a solved
// challenge enters once, and wrong, forged, expired and reused solutions are
// 403 and change nothing.
func TestProofOfWorkChallengeAtEnter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 8})

	r, _, err := h.enter(q, "ann")
	if err != nil {
		t.Fatal(err)
	}
	r.problem(t, http.StatusPreconditionRequired, "challenge-required")
	if !strings.Contains(string(r.body), "/api/v1/queues/"+q+"/challenge") {
		t.Fatalf("428 does not say where the challenge is: %s", r.body)
	}

	c := h.challenge(q, "ann")
	if c.Algorithm != "SHA-256" || c.DifficultyBits != 8 || c.ExpiresInMs < 100_000 || c.ExpiresInMs > 120_000 {
		t.Fatalf("challenge %+v, want SHA-256 at 8 bits living ~2 minutes", c)
	}
	sol := solved(c)
	// Unsolved: the smallest nonce that does not do the work.
	bad := c.Challenge + ":" + unsolvingNonce(c.Challenge, 8)
	h.enterWith(q, "ann", bad).problem(t, http.StatusForbidden, "challenge-failed")
	// Someone else's solution: bound to ann and this queue.
	h.enterWith(q, "bob", sol).problem(t, http.StatusForbidden, "challenge-failed")
	// Garbage.
	for _, g := range []string{"x", ":", c.Challenge, c.Challenge + ":", c.Challenge + ":12a", strings.Repeat("A", 300) + ":1"} {
		h.enterWith(q, "ann", g).problem(t, http.StatusForbidden, "challenge-failed")
	}
	if n := h.zcard(q); n != 0 {
		t.Fatalf("%d waiting after refused solutions, want 0", n)
	}

	r = h.enterWith(q, "ann", sol)
	if r.status != http.StatusOK {
		t.Fatalf("solved challenge: %d %s", r.status, r.body)
	}
	// The same solution again for a new entrant: it is bound to ann, so
	// carol is refused; and ann's own repeat is her standing, not a second
	// place.
	h.enterWith(q, "carol", sol).problem(t, http.StatusForbidden, "challenge-failed")
	if r := h.enterWith(q, "ann", sol); r.status != http.StatusOK {
		t.Fatalf("ann's repeated enter: %d %s", r.status, r.body)
	}
	// Anyone already in line gets their standing without a challenge.
	if r, st, err := h.enter(q, "ann"); err != nil || r.status != http.StatusOK || st.Position != 1 {
		t.Fatalf("ann without a solution, already waiting: %d %s", r.status, r.body)
	}
	// Reused by its own user after leaving: the challenge is spent.
	if r := h.must(http.MethodDelete, "/api/v1/queues/"+q+"/position", h.token("ann", ""), nil); r.status != http.StatusNoContent {
		t.Fatalf("leave: %d", r.status)
	}
	h.enterWith(q, "ann", sol).problem(t, http.StatusForbidden, "challenge-failed")
	if n := h.zcard(q); n != 0 {
		t.Fatalf("%d waiting after the reused solution, want 0", n)
	}
	// A fresh one works again.
	if r := h.enterWith(q, "ann", solved(h.challenge(q, "ann"))); r.status != http.StatusOK {
		t.Fatalf("fresh challenge after leaving: %d %s", r.status, r.body)
	}
	if n := h.zcard(q); n != 1 {
		t.Fatalf("%d waiting, want 1", n)
	}
	// The used challenges are recorded in the queue's slot and expire.
	keys, err := h.rdb.Keys(context.Background(), redisstore.KeysFor(q).Pow("*")).Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("used-challenge keys %v (%v), want 2", keys, err)
	}
	for _, k := range keys {
		if ttl := h.rdb.PTTL(context.Background(), k).Val(); ttl <= 0 || ttl > 2*time.Minute {
			t.Fatalf("%s expires in %s, want within the challenge's 2 minutes", k, ttl)
		}
	}
}

// unsolvingNonce is the smallest nonce that does not give bits zero bits.
func unsolvingNonce(value string, bits int) string {
	for i := 0; ; i++ {
		n := strconv.Itoa(i)
		if challenge.LeadingZeroBits(value, n) < bits {
			return n
		}
	}
}

// An expired solution is refused; the queue's line is unchanged.
func TestProofOfWorkExpiredSolutionIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(_ *httpapi.Options, h *harness) { h.challengeTTL = time.Second })
	q := h.newQueue(map[string]any{"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 4})
	sol := solved(h.challenge(q, "dan"))
	time.Sleep(1100 * time.Millisecond)
	h.enterWith(q, "dan", sol).problem(t, http.StatusForbidden, "challenge-failed")
	if n := h.zcard(q); n != 0 {
		t.Fatalf("%d waiting after an expired solution, want 0", n)
	}
}

// The difficulty is a live knob: raising it refuses solutions of challenges
// issued at the old difficulty and hands out harder ones; NONE turns the
// challenge off at once.
func TestProofOfWorkDifficultyChangesLive(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 4})
	old := solved(h.challenge(q, "eve"))

	if r := h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), map[string]any{"powDifficultyBits": 12}); r.status != http.StatusOK {
		t.Fatalf("raise the difficulty: %d %s", r.status, r.body)
	}
	h.enterWith(q, "eve", old).problem(t, http.StatusForbidden, "challenge-failed")
	c := h.challenge(q, "eve")
	if c.DifficultyBits != 12 {
		t.Fatalf("challenge after the raise: %d bits, want 12", c.DifficultyBits)
	}
	if r := h.enterWith(q, "eve", solved(c)); r.status != http.StatusOK {
		t.Fatalf("solution at the new difficulty: %d %s", r.status, r.body)
	}
	var pub struct {
		EnterChallenge    string `json:"enterChallenge"`
		PowDifficultyBits int    `json:"powDifficultyBits"`
	}
	h.must(http.MethodGet, "/api/v1/queues/"+q, "", nil).json(t, &pub)
	if pub.EnterChallenge != "PROOF_OF_WORK" || pub.PowDifficultyBits != 12 {
		t.Fatalf("public view %+v, want PROOF_OF_WORK at 12 bits", pub)
	}

	if r := h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), map[string]any{"enterChallenge": "NONE"}); r.status != http.StatusOK {
		t.Fatalf("turn the challenge off: %d %s", r.status, r.body)
	}
	if r, st, err := h.enter(q, "fay"); err != nil || r.status != http.StatusOK || st.Position != 2 {
		t.Fatalf("enter with the challenge off: %d %s", r.status, r.body)
	}
	h.must(http.MethodPost, "/api/v1/queues/"+q+"/challenge", h.token("gus", ""), nil).problem(t, http.StatusConflict, "challenge-not-required")
	for _, bad := range []map[string]any{{"enterChallenge": "CAPTCHA"}, {"powDifficultyBits": 0}, {"powDifficultyBits": 33}, {"enterChallenge": 1}} {
		h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), bad).problem(t, http.StatusBadRequest, "validation-failed")
	}
}

// Fifty concurrent enters with one solution: exactly one place is given.
func TestProofOfWorkSolutionIsSingleUseUnderConcurrency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"enterChallenge": "PROOF_OF_WORK", "powDifficultyBits": 6})
	sol := solved(h.challenge(q, "hal"))
	// hal enters with one solution from 50 goroutines at once: one enter
	// gives the place and records the challenge used, the others find hal
	// waiting (their standing), none is a second place.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
		errs   []error
	)
	for range 50 {
		wg.Go(func() {
			r, err := h.do(http.MethodPost, "/api/v1/queues/"+q+"/enter", h.token("hal", ""), nil, "X-Enter-Challenge", sol)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			counts[r.status]++
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d transport errors, first %v", len(errs), errs[0])
	}
	if counts[http.StatusOK] != 50 || h.zcard(q) != 1 {
		t.Fatalf("answers %v, %d waiting; want 50 x 200 and 1 waiting", counts, h.zcard(q))
	}
	keys, _ := h.rdb.Keys(context.Background(), redisstore.KeysFor(q).Pow("*")).Result()
	if len(keys) != 1 {
		t.Fatalf("%d used-challenge records, want 1", len(keys))
	}
}
