package dispatch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// heldDraw is a Store whose draw hangs in PlaceDrawn until its context
// ends, and then answers late, as a slow Redis does: the draw goroutine is
// mid-call when the dispatcher stops, and for a while after.
type heldDraw struct {
	*redisstore.Store
	placing  chan struct{}
	returned atomic.Bool
}

func (h *heldDraw) PlaceDrawn(ctx context.Context, q string, epoch int64, users []string) (queue.DrawWork, error) {
	select {
	case h.placing <- struct{}{}:
	default:
	}
	<-ctx.Done()
	time.Sleep(300 * time.Millisecond)
	h.returned.Store(true)
	return queue.DrawWork{}, ctx.Err()
}

// TestRunReturnsOnlyOnceEveryGoroutineItStartedHasEnded: Run starts the
// leases' renewals, the ticks (and their draws) and the relay, and returns
// only once each has ended: a draw in the middle of a Redis call when the
// dispatcher stops has returned before Run does, and no goroutine of the
// dispatcher is left (goleak). Not parallel: goleak sees the whole binary.
func TestRunReturnsOnlyOnceEveryGoroutineItStartedHasEnded(t *testing.T) {
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second})
	starts := time.Now().Add(time.Second)
	q := c.newQueue(func(cfg *queue.Config) { cfg.StartsAt, cfg.AdmissionRatePerSec = starts, 100 })
	ctx := context.Background()
	for i := range 20 {
		if st, err := c.store.Enter(ctx, q, fmt.Sprintf("early-%02d", i)); err != nil || st.State != queue.PreQueue {
			t.Fatalf("enter before the start: %s %v", st.State, err)
		}
	}
	before := goleak.IgnoreCurrent()

	store := &heldDraw{Store: c.store, placing: make(chan struct{}, 1)}
	o := c.opts
	o.Owner = "owners-test"
	d, err := dispatch.New(store, c.pub, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, o)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- d.Run(runCtx) }()
	select {
	case <-store.placing:
	case <-time.After(60 * time.Second):
		stop()
		t.Fatal("no draw began within 60 s of the queue's start")
	}
	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60 s of its context's end")
	}
	if !store.returned.Load() {
		t.Fatal("Run returned while its draw was still in PlaceDrawn")
	}
	goleak.VerifyNone(t, before)
}
