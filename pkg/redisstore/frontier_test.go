package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// entered fills q with n people from 8 goroutines and returns each one's
// place (sequence number) and the queue's generation.
func entered(t *testing.T, s *redisstore.Store, q string, n int) (map[string]int64, int64) {
	t.Helper()
	var (
		mu     sync.Mutex
		seqs   = make(map[string]int64, n)
		gen    int64
		wg     sync.WaitGroup
		errs   = make(chan error, 8)
		worker = 8
	)
	for w := range worker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += worker {
				u := fmt.Sprintf("u%06d", i)
				st, err := s.Enter(context.Background(), q, u)
				if err != nil || st.State != queue.Waiting || st.Seq <= 0 {
					errs <- fmt.Errorf("enter %s: %+v %v", u, st, err)
					return
				}
				mu.Lock()
				seqs[u], gen = st.Seq, st.Generation
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seqs) != n || gen <= 0 {
		t.Fatalf("%d places, generation %d; want %d places and a generation", len(seqs), gen, n)
	}
	return seqs, gen
}

func startFrontiers(t *testing.T, s *redisstore.Store) *redisstore.FrontierCache {
	t.Helper()
	c := redisstore.NewFrontierCache(s, slog.New(slog.NewTextHandler(io.Discard, nil)), redisstore.FrontierOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// frontierOf waits until c has a frontier of q whose Last is last.
func frontierOf(t *testing.T, c *redisstore.FrontierCache, q string, last int64) *queue.Frontier {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if f := c.Lookup(q); f != nil && f.Last == last {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("no frontier of %s at %d after 3 s (have %+v)", q, last, c.Lookup(q))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFrontierPlacesMatchTheLine: with nobody admitted yet and every tenth
// place empty, the frontier tells everyone beyond the exact window their
// place, off by at most one (the leavers of the bin a place cuts are
// spread evenly).
func TestFrontierPlacesMatchTheLine(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) { c.AdmissionRatePerSec = 100 })
	ctx := context.Background()
	seqs, gen := entered(t, s, q, 3000)
	for u, seq := range seqs {
		if seq%10 == 3 {
			if _, err := s.Leave(ctx, q, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := startFrontiers(t, s)
	c.Lookup(q)
	f := frontierOf(t, c, q, 0)
	if !f.Usable || f.Waiting != 2700 || f.Tail != 3000 || f.Generation != gen {
		t.Fatalf("frontier usable=%v waiting=%d tail=%d gen=%d, want usable, 2700, 3000, %d", f.Usable, f.Waiting, f.Tail, f.Generation, gen)
	}
	worst, answered := 0.0, 0
	for u, seq := range seqs {
		rank, err := rdb.ZRank(ctx, redisstore.KeysFor(q).Waiting(), u).Result()
		if err == redis.Nil {
			continue // a leaver (only Redis can say NOT_IN_QUEUE)
		}
		st, ok := f.Standing(gen, seq)
		if !ok {
			if rank+1 > f.ExactWindow()+1 {
				t.Fatalf("%s at %d not answered from the frontier (exact window %d)", u, rank+1, f.ExactWindow())
			}
			continue
		}
		answered++
		worst = math.Max(worst, math.Abs(float64(st.Position-(rank+1))))
		if st.Total != 2700 || st.State != queue.Waiting {
			t.Fatalf("%s: %+v", u, st)
		}
	}
	// Every tenth number is empty, so each bin of 16 has one or two
	// leavers; the place within a cut bin is off by at most one.
	if want := 2700 - int(f.ExactWindow()); answered != want || worst > 1 {
		t.Fatalf("answered %d from the frontier (want %d: all but the exact window), worst error %.0f places (want <= 1)", answered, want, worst)
	}
	if _, ok := f.Standing(gen+1, seqs["u000100"]); ok {
		t.Fatal("a ticket of another generation was answered from the frontier")
	}
	t.Logf("3,000 entered, 300 left: %d of 2,700 answered from the frontier, worst error %.0f", answered, worst)
}

// TestFrontierAccuracyWhileAdmittingAndLeaving is the issue's accuracy
// drill: a line of 20,000 admitted at 500/s while people leave at random
// (2,000 over the run, 10 % of the line); 500 sampled tickets, each
// answered from the frontier within max(1, 1 %) of ZRANK.
func TestFrontierAccuracyWhileAdmittingAndLeaving(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionRatePerSec, c.TokenTTLSeconds, c.ActivationSpreadMs, c.MaxQueueSize = 500, 600, 0, 50_000
	})
	ctx := context.Background()
	const n = 20_000
	seqs, gen := entered(t, s, q, n)
	users := make([]string, 0, n)
	for u := range seqs {
		users = append(users, u)
	}
	rng := rand.New(rand.NewPCG(14, 20))
	rng.Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })
	leavers, sampled := users[:2000], users[2000:]

	c := startFrontiers(t, s)
	c.Lookup(q)
	frontierOf(t, c, q, 0)

	epoch := lead(t, s, q, "a")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // the leader: a tick every 100 ms
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 60)}); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // the leavers, 200 a second
		defer wg.Done()
		for _, u := range leavers {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := s.Leave(ctx, q, u); err != nil {
				errs <- err
				return
			}
		}
	}()

	k := redisstore.KeysFor(q)
	var (
		checked, exact, raced, worstAt int
		worst                          float64
	)
	for i := 0; checked < 500 && i < 20_000; i++ {
		time.Sleep(15 * time.Millisecond)
		u := sampled[rng.IntN(len(sampled))]
		f := c.Lookup(q)
		if f == nil {
			t.Fatal("the frontier went stale while Redis answered")
		}
		st, ok := f.Standing(gen, seqs[u])
		var rank, card *redis.IntCmd
		var last *redis.StringCmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			rank = p.ZRank(ctx, k.Waiting(), u)
			card = p.ZCard(ctx, k.Waiting())
			last = p.HGet(ctx, k.Dispatch(), "frontier")
			return nil
		})
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		if rank.Err() == redis.Nil {
			continue // admitted or left
		}
		if got, _ := last.Int64(); got != f.Last {
			raced++ // a tick between the answer and the rank: not comparable
			continue
		}
		if !ok {
			exact++ // near the front: Redis answers
			continue
		}
		want := rank.Val() + 1
		diff := math.Abs(float64(st.Position - want))
		// With no tick since the frontier was read, the line shrank only by
		// leavers since then, which the frontier cannot know of: each may
		// be ahead of u (a leave between the two reads is not an error of
		// the estimate).
		since := max(f.Waiting-card.Val(), 0)
		if diff > math.Max(1, 0.01*float64(want))+float64(since) {
			t.Errorf("%s (seq %d): frontier says %d, ZRANK %d", u, seqs[u], st.Position, want)
		}
		if rel := diff / float64(want); rel > worst {
			worst, worstAt = rel, int(want)
		}
		checked++
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if checked < 500 {
		t.Fatalf("only %d samples compared (raced %d, near the front %d)", checked, raced, exact)
	}
	issued, _ := rdb.HGet(ctx, k.Dispatch(), "issuedTotal").Int64()
	if issued < 1000 {
		t.Fatalf("only %d admitted during the drill", issued)
	}
	t.Logf("%d samples within max(1, 1 %%) of ZRANK; worst %.3f %% (at place %d); %d raced with a tick, %d near the front; %d admitted meanwhile",
		checked, 100*worst, worstAt, raced, exact, issued)
}

// TestFrontierCacheOverTwoHundredQueues: one cache tracking 200 queues
// reads them all in one pipelined round; every one is fresh after it, with
// its own line's figures, and a queue deleted meanwhile is not answered
// from a frontier for long.
func TestFrontierCacheOverTwoHundredQueues(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	const n = 200
	qs := make([]string, n)
	for i := range qs {
		qs[i] = newQueue(t, s, nil)
		for j := range i%5 + 1 {
			if _, err := s.Enter(ctx, qs[i], fmt.Sprintf("u%d", j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rounds []time.Duration
	var mu sync.Mutex
	c := redisstore.NewFrontierCache(s, slog.New(slog.NewTextHandler(io.Discard, nil)), redisstore.FrontierOptions{
		Observe: func(queues int, d time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err == nil && queues == n {
				rounds = append(rounds, d)
			}
		}})
	for _, q := range qs {
		c.Lookup(q)
	}
	c.Refresh(ctx)
	for i, q := range qs {
		f := c.Lookup(q)
		if f == nil || f.Waiting != int64(i%5+1) || f.Tail != int64(i%5+1) || !f.Usable {
			t.Fatalf("queue %d after one round: %+v", i, f)
		}
	}
	for range 9 {
		c.Refresh(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rounds) != 10 {
		t.Fatalf("%d rounds over all %d queues, want 10", len(rounds), n)
	}
	slices.Sort(rounds)
	t.Logf("a round over %d queues: median %s, slowest %s", n, rounds[5].Round(time.Microsecond), rounds[9].Round(time.Microsecond))
}
