package presence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// recorder records every call; fail makes calls for a queue fail.
type recorder struct {
	mu    sync.Mutex
	calls map[string][][]string
	fail  string
}

func (r *recorder) Sighted(_ context.Context, q string, users []string) (queue.Sightings, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string][][]string{}
	}
	r.calls[q] = append(r.calls[q], slices.Sorted(slices.Values(users)))
	if q == r.fail {
		return queue.Sightings{}, errors.New("redis down")
	}
	return queue.Sightings{Seen: int64(len(users))}, nil
}

func (r *recorder) snapshot() map[string][][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][][]string{}
	for q, c := range r.calls {
		out[q] = slices.Clone(c)
	}
	return out
}

type counting struct {
	mu                   sync.Mutex
	sent, failed, droppd int
}

func (c *counting) Sent(_ string, users int, _ queue.Sightings, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failed++
		return
	}
	c.sent += users
}

func (c *counting) Dropped(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.droppd += n
}

func TestBookSendsEachPersonOnceAQueueInOneCall(t *testing.T) {
	rec, m := &recorder{fail: "down"}, &counting{}
	b := New(rec, m)
	var wg sync.WaitGroup
	for range 8 { // eight pollers at once, each seeing everyone twice
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				b.Saw("a", fmt.Sprintf("u%03d", i))
				b.Saw("a", fmt.Sprintf("u%03d", i))
				if i < 3 {
					b.Saw("down", "x")
				}
			}
		}()
	}
	wg.Wait()
	if err := b.Flush(context.Background()); err == nil {
		t.Fatal("flush with a failing queue returned no error")
	}
	calls := rec.snapshot()
	if len(calls["a"]) != 1 || len(calls["a"][0]) != 200 || len(calls["down"]) != 1 || len(calls["down"][0]) != 1 {
		t.Fatalf("calls: %d for a (%v people), %d for down; want one each, 200 and 1 people", len(calls["a"]), len(calls["a"]), len(calls["down"]))
	}
	if m.sent != 200 || m.failed != 1 {
		t.Fatalf("metrics: %d sent, %d failed batches; want 200 and 1", m.sent, m.failed)
	}
	// Sent means gone: the next flush sends nothing.
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.snapshot()["a"]); n != 1 {
		t.Fatalf("%d calls for a after an empty flush, want still 1", n)
	}
}

func TestBookDropsBeyondMaxPendingAndCountsIt(t *testing.T) {
	rec, m := &recorder{}, &counting{}
	b := New(rec, m)
	// Ids spread over the shards by a random seed: fill past the bound and
	// count what each shard held.
	for i := range MaxPending + 10_000 {
		b.Saw("q", fmt.Sprintf("u%07d", i))
	}
	held := 0
	for i := range b.shards {
		held += b.shards[i].n
	}
	if held > MaxPending || held+m.droppd != MaxPending+10_000 {
		t.Fatalf("held %d, dropped %d of %d; want at most %d held and every other one counted", held, m.droppd, MaxPending+10_000, MaxPending)
	}
	if m.droppd < 10_000 {
		t.Fatalf("dropped %d, want at least 10,000", m.droppd)
	}
}

func TestRunSendsTheLastSightingsWhenItStops(t *testing.T) {
	rec := &recorder{}
	b := New(rec, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	b.Saw("q", "ann")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of its context ending")
	}
	if calls := rec.snapshot()["q"]; len(calls) != 1 || !slices.Equal(calls[0], []string{"ann"}) {
		t.Fatalf("calls for q: %v, want ann's sighting sent on the way out", calls)
	}
}
