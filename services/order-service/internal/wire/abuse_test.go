package wire

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// idempotencyRows counts the idempotency rows a user left in the order
// database.
func (s *stack) idempotencyRows(user string) int {
	s.t.Helper()
	return s.queryInt(`SELECT count(*) FROM idempotency WHERE user_id = $1`, user)
}

// One logged-in user sends junk X-Entry-Tokens at 200/s while admitted
// buyers order in the same second. The per-queue limit (5/s here) counts
// only requests whose token passed the cheap check, so the junk cannot use
// it up: every buyer gets 201. The junk is limited per user and never
// reaches Postgres, not even with an Idempotency-Key.
func TestJunkOrdersCannotLockBuyersOut(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{rateLimit: 5, userRateLimit: 5})
	s.product("p1", 100)
	junkUser := "junk-" + s.q
	buyers := []string{"b1-" + s.q, "b2-" + s.q, "b3-" + s.q, "b4-" + s.q, "b5-" + s.q}
	secrets := s.admit(buyers...)

	const junk = 200
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		wg     sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / junk)
	start := time.Now()
	for i := range junk {
		<-tick.C
		wg.Go(func() {
			r := s.order(junkUser, fmt.Sprintf("junk-secret-%d", i), "p1", 1, "Idempotency-Key", fmt.Sprintf("junk-key-%d", i))
			mu.Lock()
			counts[r.status]++
			mu.Unlock()
		})
		if i == junk/2 {
			// The buyers order in the middle of the flood.
			for _, b := range buyers {
				wg.Go(func() {
					r := s.order(b, secrets[b], "p1", 1, "Idempotency-Key", "buy-"+b)
					mu.Lock()
					counts[1000+r.status]++ // buyers' answers kept apart
					mu.Unlock()
					if r.status != http.StatusCreated {
						t.Errorf("buyer %s during the junk flood: %d %s", b, r.status, r.body)
					}
				})
			}
		}
	}
	tick.Stop()
	wg.Wait()
	took := time.Since(start)
	t.Logf("flood of %d junk orders took %s; answers %v", junk, took.Round(time.Millisecond), counts)
	if counts[1000+http.StatusCreated] != len(buyers) {
		t.Fatalf("buyers got 201 x%d, want %d: %v", counts[1000+http.StatusCreated], len(buyers), counts)
	}
	if counts[http.StatusForbidden]+counts[http.StatusTooManyRequests] != junk {
		t.Fatalf("junk answers %v, want only 403 and 429, %d in all", counts, junk)
	}
	// 5/s per user with a burst of 5: over the flood's time (a second,
	// longer on a loaded machine) at least the burst and at most the burst
	// plus 5 a second of the junk are answered 403 (the rest 429).
	if n, most := counts[http.StatusForbidden], 5+int(5*took.Seconds()+0.999); n < 5 || n > most {
		t.Fatalf("junk answered 403 x%d in %s, want 5..%d (the per-user limit): %v", n, took.Round(time.Millisecond), most, counts)
	}
	if n := s.idempotencyRows(junkUser); n != 0 {
		t.Fatalf("the junk left %d idempotency rows in Postgres, want 0", n)
	}
	for _, b := range buyers {
		if n := s.idempotencyRows(b); n != 1 {
			t.Fatalf("buyer %s has %d idempotency rows, want 1", b, n)
		}
	}
	if st := s.stock("p1"); st != 100-len(buyers) {
		t.Fatalf("stock %d, want %d", st, 100-len(buyers))
	}
}

// An Idempotency-Key is stored only past the token check: a refused token
// writes nothing, while a retry of a finished order still replays it (the
// spent token is recognised as its holder's).
func TestIdempotencyKeyIsStoredOnlyPastTheTokenCheck(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{userRateLimit: 5})
	s.product("p1", 10)
	user := "ivy-" + s.q
	secret := s.admit(user)[user]

	if r := s.order(user, "not-the-secret", "p1", 1, "Idempotency-Key", "k-junk"); r.status != http.StatusForbidden {
		t.Fatalf("wrong token: %d %s", r.status, r.body)
	}
	if n := s.idempotencyRows(user); n != 0 {
		t.Fatalf("a refused token left %d idempotency rows, want 0", n)
	}
	first := s.order(user, secret, "p1", 1, "Idempotency-Key", "k-1")
	if first.status != http.StatusCreated {
		t.Fatalf("order: %d %s", first.status, first.body)
	}
	// The token is spent now; its holder's retry with the same key replays.
	again := s.order(user, secret, "p1", 1, "Idempotency-Key", "k-1")
	if again.status != http.StatusCreated || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry with the spent token: %d %s (replayed %q)", again.status, again.body, again.header.Get("Idempotent-Replayed"))
	}
	// A new key with the spent token is a second order attempt: refused,
	// and not stored either.
	if r := s.order(user, secret, "p1", 1, "Idempotency-Key", "k-2"); r.status != http.StatusForbidden || r.problemType() != "invalid-entry-token" {
		t.Fatalf("spent token, new key: %d %s", r.status, r.body)
	}
	if n := s.idempotencyRows(user); n != 1 {
		t.Fatalf("%d idempotency rows, want 1 (the order's)", n)
	}
	if st := s.stock("p1"); st != 9 {
		t.Fatalf("stock %d, want 9", st)
	}
}
