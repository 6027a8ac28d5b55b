package dispatch_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// entry is one person of the ETA drill as they entered.
type entry struct {
	user          string
	at            time.Time
	eta, low, hig int64 // seconds, as the gateway's view said at entry
	leaves        bool
}

// TestETAHoldsWithThreeInTenLeaving is the wait estimate's drill: 1,000
// people enter a queue admitting 20/s, over ten seconds (100/s, so the line
// grows to hundreds); three in ten, at random, leave at a random moment of
// their expected wait. For everyone admitted, the wait the gateway
// announced at entry is compared with the wait they had (entry to the
// token's issue, by the same clock): the median relative error must be at
// most 15 %, and at least 70 % must be admitted inside the 80 % interval
// they were shown.
func TestETAHoldsWithThreeInTenLeaving(t *testing.T) {
	t.Parallel()
	const (
		people    = 1000
		rate      = 20.0
		arrivals  = 100.0 // per second
		leaveProb = 0.3
	)
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionRatePerSec, cfg.ActivationSpreadMs, cfg.TokenTTLSeconds = rate, 0, 600
		cfg.MaxQueueSize, cfg.MaxWaitSeconds = 10_000, 3600
	})
	c.start(1)
	c.leader(q)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(13, 4))

	entries := make([]entry, people)
	var wg sync.WaitGroup
	errs := make(chan error, people)
	start := time.Now()
	for i := range entries {
		// Arrivals on a schedule, not a synchronisation: person i comes at i/100 s.
		if d := time.Until(start.Add(time.Duration(float64(i) / arrivals * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		u := userName(i)
		at := time.Now()
		st, err := c.store.Enter(ctx, q, u)
		if err != nil || st.State != queue.Waiting {
			t.Fatalf("%s entered: %+v %v", u, st, err)
		}
		v, _ := queue.NewView(st, false)
		e := entry{user: u, at: at, eta: v.EtaSeconds, low: v.EtaLowSeconds, hig: v.EtaHighSeconds, leaves: rng.Float64() < leaveProb}
		entries[i] = e
		if e.leaves {
			// At a random moment of the wait they were told to expect.
			after := time.Duration(rng.Float64() * 0.9 * float64(e.eta) * float64(time.Second))
			wg.Go(func() {
				time.Sleep(after)
				if _, err := c.store.Leave(ctx, q, u); err != nil {
					errs <- fmt.Errorf("%s leaves: %w", u, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	k := redisstore.KeysFor(q)
	deadline := time.Now().Add(2 * time.Minute)
	for c.rdb.ZCard(ctx, k.Waiting()).Val() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d still waiting two minutes after the last entry", c.rdb.ZCard(ctx, k.Waiting()).Val())
		}
		time.Sleep(200 * time.Millisecond)
	}

	var relErr []float64
	admitted, inside, leftInTime := 0, 0, 0
	for _, e := range entries {
		activate, err := c.rdb.HGet(ctx, k.Token(e.user), redisstore.TokenFieldActivateAt).Result()
		if err != nil {
			if e.leaves {
				leftInTime++
				continue
			}
			t.Fatalf("%s stayed and has no token: %v", e.user, err)
		}
		ms, _ := strconv.ParseInt(activate, 10, 64)
		waited := time.UnixMilli(ms).Sub(e.at).Seconds()
		admitted++
		relErr = append(relErr, math.Abs(waited-float64(e.eta))/math.Max(waited, 0.1))
		if waited >= float64(e.low) && waited <= float64(e.hig) {
			inside++
		}
	}
	// Admission kept entry order: the people admitted, in the order of
	// their TokenIssued events, entered in that order.
	inversions := 0
	var prev int64 = -1
	for _, e := range c.pub.of(queue.EventTokenIssued) {
		if e.QueueID != q {
			continue
		}
		if n := seqOf(t, e); n < prev {
			inversions++
		} else {
			prev = n
		}
	}
	if inversions != 0 {
		t.Errorf("%d TokenIssued out of entry order", inversions)
	}
	slices.Sort(relErr)
	median := relErr[len(relErr)/2]
	p90 := relErr[len(relErr)*9/10]
	share := float64(inside) / float64(admitted)
	last := entries[people-1]
	t.Logf("%d admitted, %d left before their turn; the last to enter was told %d s (%d..%d); relative error median %.3f, p90 %.3f; %.3f admitted inside their interval",
		admitted, leftInTime, last.eta, last.low, last.hig, median, p90, share)
	if admitted+leftInTime != people || leftInTime < 200 || leftInTime > 400 {
		t.Errorf("%d admitted and %d left of %d; want all accounted for, about 300 leaving", admitted, leftInTime, people)
	}
	if median > 0.15 {
		t.Errorf("median relative error %.3f, want at most 0.15", median)
	}
	if share < 0.70 {
		t.Errorf("%.3f of the admitted were admitted inside the interval they were shown, want at least 0.70", share)
	}
}
