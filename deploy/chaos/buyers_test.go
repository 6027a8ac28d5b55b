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
			if res := r.call(http.MethodPost, gateway+"/api/v1/queues/"+r.q+"/enter", u, "", "", nil); res.status != http.StatusOK {
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

// buying is every buyer of a drill: started as each is admitted, each
// orders once its token is in Redis, again after a 503 (the token comes
// back after a failure that consumed it), until 201 or sold out.
type buying struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	out  buyOutcome
	done chan struct{}
}

type buyOutcome struct {
	created, soldOut, retried int
	// answerLost counts the created orders whose 201 was lost (503 or a
	// time-out): the buyer learned of them asking again with the token.
	answerLost int
	errs       []error
}

// buyAsAdmitted walks the users in entry order (the order they are
// admitted in, but for enters that overtook each other), one Redis read per
// 50 ms, and starts each one's buyer as their token appears.
func (r *rig) buyAsAdmitted(orderSvc string, rdb redis.UniversalClient, users []string) *buying {
	b := &buying{done: make(chan struct{})}
	keys := redisstore.KeysFor(r.q)
	ctx := context.Background()
	secret := func(u string) string {
		s, _ := rdb.HGet(ctx, keys.Token(u), redisstore.TokenFieldSecret).Result()
		return s
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		deadline := time.Now().Add(time.Duration(len(users))*time.Second/10 + 2*time.Minute)
		for _, u := range users {
			for secret(u) == "" {
				if time.Now().After(deadline) {
					b.fail(fmt.Errorf("%s: no token by the deadline", u))
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.buy(r, orderSvc, u, secret)
			}()
		}
	}()
	go func() { b.wg.Wait(); close(b.done) }()
	return b
}

func (b *buying) buy(r *rig, orderSvc, u string, secret func(string) string) {
	deadline := time.Now().Add(2 * time.Minute)
	// last is the token of an attempt whose answer was lost (503, or no
	// answer in 10 s on a busy machine): its order may have been created.
	last := ""
	for time.Now().Before(deadline) {
		tok := secret(u)
		if tok == "" && last != "" {
			// Gone from Redis: consumed by that attempt, which either
			// failed (the token comes back) or created the order (spent).
			// The holder asks again with it: an order exists if the
			// answer is token-already-used.
			if res := r.order(orderSvc, u, last); res.status == http.StatusConflict && res.body["type"] == "token-already-used" {
				b.mu.Lock()
				b.out.created++
				b.out.answerLost++
				b.mu.Unlock()
				return
			}
		}
		if tok == "" { // consumed by an attempt that failed; coming back
			time.Sleep(100 * time.Millisecond)
			continue
		}
		last = ""
		res := r.order(orderSvc, u, tok)
		b.mu.Lock()
		switch {
		case res.status == http.StatusCreated:
			b.out.created++
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
		default:
			b.out.errs = append(b.out.errs, fmt.Errorf("order by %s: %d %v", u, res.status, res.body))
			b.mu.Unlock()
			return
		}
	}
	b.fail(fmt.Errorf("%s: no order outcome within 2 minutes", u))
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
