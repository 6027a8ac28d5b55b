package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// A broker outage must not grow Redis without bound: the outbox fills to
// OutboxBound and admission holds there (an admitted person whose
// TokenIssued cannot be sent is not told anyway). When the broker returns,
// admission resumes and every token's event arrives, once.
func TestBrokerOutageBoundsTheOutboxAndLosesNoEvent(t *testing.T) {
	t.Parallel()
	const (
		rate   = 500.0
		bound  = 2000
		people = 5000
	)
	outage := testenv.Pick(8*time.Second, 60*time.Second)
	ctx := context.Background()
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second, OutboxBound: bound})
	q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec, cfg.MaxQueueSize = rate, 10_000 })
	k := redisstore.KeysFor(q)
	started := time.Now()
	fillConcurrently(t, c, q, people)
	t.Logf("%d entered in %v", people, time.Since(started).Round(10*time.Millisecond))

	// The sampler: XLEN every 20 ms for the whole test, every error kept.
	var (
		mu       sync.Mutex
		maxLen   int64
		samples  int
		readErrs []error
	)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			n, err := c.store.OutboxLen(sctx, q)
			mu.Lock()
			switch {
			case sctx.Err() != nil:
			case err != nil:
				readErrs = append(readErrs, err)
			default:
				samples++
				maxLen = max(maxLen, n)
			}
			mu.Unlock()
			select {
			case <-sctx.Done():
				return
			case <-tk.C:
			}
		}
	})
	t.Cleanup(func() { stopSampling(); wg.Wait() })
	stats := func() queue.Stats {
		t.Helper()
		_, st, err := c.store.Config(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	c.start(1)
	testenv.WaitFor(t, 15*time.Second, "250 TokenIssued published before the outage", func() bool {
		return len(c.pub.of(queue.EventTokenIssued)) >= 250
	})
	t.Logf("first 250 published %v after the start", time.Since(started).Round(10*time.Millisecond))
	c.pub.fail.Store(true)
	down := time.Now()
	before := stats().IssuedTotal
	testenv.WaitFor(t, outage, "admission held (OUTBOX_BACKLOG) during the outage", func() bool {
		return stats().Held == queue.HeldOutboxBacklog
	})
	heldAfter := time.Since(down)
	if rest := outage - time.Since(down); rest > 0 {
		time.Sleep(rest) // the outage itself: the sampler watches the bound meanwhile
	}
	st := stats()
	mu.Lock()
	maxDuring := maxLen
	mu.Unlock()
	xlen, _ := c.store.OutboxLen(ctx, q)
	t.Logf("outage %v: held after %v; issued %d before it, %d during it; XLEN %d at its end, max %d",
		outage, heldAfter.Round(10*time.Millisecond), before, st.IssuedTotal-before, xlen, maxDuring)
	if st.Held != queue.HeldOutboxBacklog {
		t.Fatalf("at the end of the outage: held %q, want %s", st.Held, queue.HeldOutboxBacklog)
	}
	// Held at the bound exactly: the bound is what stopped admission, and
	// ticks filled the room that was left.
	if xlen != bound || st.IssuedTotal >= people {
		t.Fatalf("at the end of the outage XLEN %d (want %d), issued %d of %d", xlen, bound, st.IssuedTotal, people)
	}

	c.pub.fail.Store(false)
	up, err := c.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	upWall := time.Now()
	testenv.WaitFor(t, 60*time.Second, "everyone admitted and every event published", func() bool {
		return stats().IssuedTotal == people && c.rdb.XLen(ctx, k.Outbox()).Val() == 0 &&
			len(c.pub.of(queue.EventTokenIssued)) >= people
	})
	drained := time.Since(upWall)
	stopSampling()
	wg.Wait()

	issued := c.pub.of(queue.EventTokenIssued)
	perToken, users := map[string]int{}, map[string]bool{}
	resumed := 0
	var firstAfter time.Time
	for _, e := range issued {
		perToken[e.TokenID]++
		users[e.UserID] = true
		if e.OccurredAt.After(up) {
			resumed++
			if firstAfter.IsZero() || e.OccurredAt.Before(firstAfter) {
				firstAfter = e.OccurredAt
			}
		}
	}
	dups := 0
	for _, n := range perToken {
		if n > 1 {
			dups++
		}
	}
	final := stats()
	t.Logf("broker back: first admission %v later (Redis clock), %d admitted after it; all %d published within %v",
		firstAfter.Sub(up).Round(time.Millisecond), resumed, people, drained.Round(10*time.Millisecond))
	t.Logf("XLEN: %d samples, max %d (bound %d); %d TokenIssued for %d tokens (%d duplicated), issuedTotal %d",
		samples, maxLen, bound, len(issued), len(perToken), dups, final.IssuedTotal)
	if len(readErrs) > 0 {
		t.Errorf("%d XLEN samples failed, first: %v", len(readErrs), readErrs[0])
	}
	if samples < int(outage/(100*time.Millisecond)) {
		t.Errorf("only %d XLEN samples over a %v outage", samples, outage)
	}
	if maxLen > bound {
		t.Errorf("the outbox reached %d events, above its bound %d", maxLen, bound)
	}
	if resumed == 0 {
		t.Error("nobody admitted after the broker came back")
	}
	if len(issued) != people || len(perToken) != people || int64(len(perToken)) != final.IssuedTotal || dups != 0 || len(users) != people {
		t.Errorf("%d TokenIssued, %d distinct tokens, %d users, issuedTotal %d; want %d of each, exactly once",
			len(issued), len(perToken), len(users), final.IssuedTotal, people)
	}
	if final.Held != "" {
		t.Errorf("held %q after the backlog drained, want none", final.Held)
	}
}

// fillConcurrently enters n users (userName(0..n-1)) from eight goroutines:
// entry order does not matter here, and the machine is shared and slow.
func fillConcurrently(t *testing.T, c *cluster, q string, n int) {
	t.Helper()
	const workers = 8
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += workers {
				_, errs[w] = c.store.Enter(context.Background(), q, userName(i))
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("enter (worker %d): %v", w, err)
		}
	}
	if z := c.rdb.ZCard(context.Background(), redisstore.KeysFor(q).Waiting()).Val(); z != int64(n) {
		t.Fatalf("%d waiting, want %d", z, n)
	}
}
