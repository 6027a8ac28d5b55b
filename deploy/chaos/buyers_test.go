package chaos

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// enterEach enters every user at perSec through the gateway, each in its own
// goroutine, and returns every refusal: an enter answered 200 is an
// acknowledged place.
func (r *rig) enterEach(gateway string, users []string, perSec int) []error {
	tick := time.NewTicker(time.Second / time.Duration(perSec))
	defer tick.Stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(users))
	for _, u := range users {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A 503 (the store slow to answer, or to get a replica's
			// acknowledgement on a loaded machine) says when to try again, and
			// an enter again keeps the place: the person enters again then, as
			// the page does, at most 10 times.
			res := r.call(http.MethodPost, gateway+"/api/v1/queues/"+r.q+"/enter", u, "", "", nil)
			for try := 1; res.status == http.StatusServiceUnavailable && try < 10; try++ {
				wait := time.Second
				if ms, ok := res.body["retryAfterMs"].(float64); ok && ms > 0 {
					wait = time.Duration(ms) * time.Millisecond
				}
				time.Sleep(wait)
				res = r.call(http.MethodPost, gateway+"/api/v1/queues/"+r.q+"/enter", u, "", "", nil)
			}
			if res.status != http.StatusOK {
				errs <- fmt.Errorf("%s: %d %v", u, res.status, res.body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// buying is every buyer of a drill. Each orders once its token is in
// Redis, under one Idempotency-Key for all of its attempts, as a shop's
// page does: after a 503 it orders again once the token is back (an
// attempt that consumed it and failed gives it back); after an answer it
// never got (no answer in 10 s on a busy machine) it asks again with the
// same key and token, and the order service replays the stored answer
// (the order, or sold out) or, if that attempt failed, refuses the spent
// token until it is back. Each buyer ends at 201 or sold out.
type buying struct {
	r        *rig
	orderSvc string
	secret   func(user string) string
	within   time.Duration
	wg       sync.WaitGroup
	mu       sync.Mutex
	out      buyOutcome
	done     chan struct{}
}

type buyOutcome struct {
	created, soldOut, retried int
	// answerLost counts the created orders whose 201 was lost (503 or a
	// time-out): the buyer learned of them from the replay of its key.
	answerLost int
	errs       []error
}

// newBuying is a drill's buyers, each given within for an outcome; the
// token secrets are read from Redis.
func (r *rig) newBuying(orderSvc string, rdb redis.UniversalClient, within time.Duration) *buying {
	keys := redisstore.KeysFor(r.q)
	return &buying{
		r: r, orderSvc: orderSvc, within: within, done: make(chan struct{}),
		secret: func(u string) string {
			tok, _, _ := redisstore.ParseTokenMarker(rdb.Get(context.Background(), keys.Status(u)).Val())
			return tok.Secret
		},
	}
}

// add starts u's buyer.
func (b *buying) add(u string) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.buy(u)
	}()
}

// buyAsAdmitted walks the users in entry order (the order they are
// admitted in, but for enters that overtook each other), one Redis read per
// 50 ms, and starts each one's buyer as their token appears.
func (r *rig) buyAsAdmitted(orderSvc string, rdb redis.UniversalClient, users []string) *buying {
	b := r.newBuying(orderSvc, rdb, 2*time.Minute)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		deadline := time.Now().Add(time.Duration(len(users))*time.Second/10 + 2*time.Minute)
		for _, u := range users {
			for b.secret(u) == "" {
				if time.Now().After(deadline) {
					b.fail(fmt.Errorf("%s: no token by the deadline", u))
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.add(u)
		}
	}()
	b.closeWhenDone()
	return b
}

// closeWhenDone closes done once every buyer added so far, and every one
// they add, has ended.
func (b *buying) closeWhenDone() { go func() { b.wg.Wait(); close(b.done) }() }

func (b *buying) buy(u string) {
	deadline := time.Now().Add(b.within)
	key := "buy-" + b.r.q + "-" + u // the drill's queue keeps keys apart across drills
	// last is the token of an attempt whose answer was lost (503, or no
	// answer): it may have been consumed, by an order or by a failure.
	last, seen := "", "no attempt"
	for time.Now().Before(deadline) {
		tok := b.secret(u)
		lostAnswer := tok == "" && last != ""
		switch {
		case lostAnswer:
			// Gone from Redis: consumed by that attempt. Ask again with
			// it: the order service replays what the key came to.
			tok = last
		case tok == "": // not issued yet, or coming back
			time.Sleep(100 * time.Millisecond)
			continue
		}
		res := b.r.orderKeyed(b.orderSvc, u, tok, key)
		seen = fmt.Sprintf("%d %v", res.status, res.body["type"])
		b.mu.Lock()
		switch {
		case res.status == http.StatusCreated:
			b.out.created++
			if lostAnswer {
				b.out.answerLost++
			}
			b.mu.Unlock()
			return
		case res.status == http.StatusConflict && res.body["type"] == "sold-out":
			b.out.soldOut++
			b.mu.Unlock()
			return
		case res.status == http.StatusServiceUnavailable || res.status == 0:
			b.out.retried++
			last = tok
			b.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		case lostAnswer && res.status == http.StatusConflict && res.body["type"] == "idempotency-in-progress",
			lostAnswer && res.status == http.StatusForbidden,
			lostAnswer && res.status == http.StatusTooManyRequests:
			// The lost attempt still running; or it failed and its key
			// was let go, so the spent token is refused until the
			// dispatcher gives it back; or this user's own limit on
			// such asks: wait.
			b.mu.Unlock()
			time.Sleep(300 * time.Millisecond)
		default:
			b.out.errs = append(b.out.errs, fmt.Errorf("order by %s: %d %v", u, res.status, res.body))
			b.mu.Unlock()
			return
		}
	}
	b.fail(fmt.Errorf("%s: no order outcome within %s (last answer %s, token in Redis %t)", u, b.within, seen, b.secret(u) != ""))
}

func (b *buying) fail(err error) {
	b.mu.Lock()
	b.out.errs = append(b.out.errs, err)
	b.mu.Unlock()
}

// wait returns once every buyer is done.
func (b *buying) wait() buyOutcome {
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out
}
