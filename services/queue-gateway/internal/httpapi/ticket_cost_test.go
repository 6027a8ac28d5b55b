package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// callCounter counts every command the gateway's Redis client sends, each
// command of a pipeline on its own.
type callCounter struct{ n atomic.Int64 }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestATicketPollCostsRedisAlmostNothing: 1,000 people far from the front
// poll with their tickets at the pace the gateway tells them, on one Redis
// and on a three-master cluster. Every poll is answered from the frontier
// at the exact place (nobody left or was admitted), and the gateway sends
// Redis at most one command per hundred polls (the frontier cache reads the
// queue once per 200 polls, or every 1.5 s).
func TestATicketPollCostsRedisAlmostNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"one Redis", nil},
		{"three-master cluster", func(t *testing.T) string { return testenv.StartRedisCluster(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []harnessOption
			if tc.url != nil {
				opts = append(opts, withRedisURL(tc.url(t)))
			}
			h := newHarness(t, opts...)
			q := h.newQueue(map[string]any{"admissionRatePerSec": 10})
			const ahead, pollers = 200, 1000
			tickets := h.fillLine(q, ahead+pollers)[ahead:]
			h.pollWith(q, userID(ahead), tickets[0]) // tracked from now on
			deadline := time.Now().Add(5 * time.Second)
			for h.frontiers.Lookup(q) == nil {
				if time.Now().After(deadline) {
					t.Fatal("no frontier within 5 s")
				}
				time.Sleep(20 * time.Millisecond)
			}

			calls := &callCounter{}
			h.rdb.AddHook(calls)
			front0, store0 := h.reads("frontier"), h.reads("store")
			const window = 12 * time.Second
			end := time.Now().Add(window)
			var (
				wg    sync.WaitGroup
				polls atomic.Int64
				errs  = make([]error, pollers)
			)
			for i := range pollers {
				wg.Go(func() {
					user, place := userID(ahead+i), int64(ahead+i+1)
					for time.Now().Before(end) {
						r, err := h.do(http.MethodGet, "/api/v1/queues/"+q+"/position", h.token(user, ""), nil, "X-Queue-Ticket", tickets[i])
						if err != nil {
							errs[i] = err
							return
						}
						var st standing
						if r.status == http.StatusOK {
							r.json(t, &st)
						}
						if r.status != http.StatusOK || st.State != "WAITING" || st.Position != place || st.RetryAfterMs < 1000 {
							errs[i] = fmt.Errorf("%s at place %d: %d %s", user, place, r.status, r.body)
							return
						}
						polls.Add(1)
						time.Sleep(time.Duration(st.RetryAfterMs) * time.Millisecond)
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			n, sent := polls.Load(), calls.n.Load()
			front, store := h.reads("frontier")-front0, h.reads("store")-store0
			perPoll := float64(sent) / float64(n)
			t.Logf("%d polls in %s from %d pollers: %d from the frontier, %d from the store; %d Redis commands, %.4f a poll",
				n, window, pollers, front, store, sent, perPoll)
			// Each poller polls at least every 4.6 s (place 1,200): at
			// least two polls each, whatever the machine's load.
			if n < 2*pollers || front != int(n) || store != 0 {
				t.Fatalf("%d polls, %d from the frontier, %d from the store; want at least %d, all from the frontier", n, front, store, 2*pollers)
			}
			if perPoll > 0.01 {
				t.Fatalf("%.4f Redis commands a poll, want at most 0.01", perPoll)
			}
		})
	}
}
