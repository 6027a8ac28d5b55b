package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

func event(id string) order.OutboxEvent {
	return order.OutboxEvent{EventID: id, RoutingKey: "order.failed", Type: "waitingroom.v1.OrderFailed",
		Payload: []byte("payload-" + id), OccurredAt: time.Now()}
}

func addEvents(t *testing.T, db *pg.DB, n int) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var ok bool
			ok, errs[i] = db.AddEvent(context.Background(), event(fmt.Sprintf("ev-%03d", i)))
			if errs[i] == nil && !ok {
				errs[i] = errors.New("not inserted")
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("AddEvent %d: %v", i, err)
		}
	}
}

func TestRelayBatchConcurrentRelaysPublishEachRowOnce(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	const rows = 500
	addEvents(t, db, rows)

	var mu sync.Mutex
	published := map[string]int{}
	const relays = 3
	sent := make([]int, relays)
	errs := make([]error, relays)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for r := range relays {
		wg.Go(func() {
			for ctx.Err() == nil {
				n, err := db.RelayBatch(ctx, 40, func(_ context.Context, evs []order.OutboxEvent) error {
					mu.Lock()
					for _, e := range evs {
						published[e.EventID]++
					}
					mu.Unlock()
					time.Sleep(2 * time.Millisecond) // hold the rows a while: the relays overlap
					return nil
				})
				if err != nil {
					errs[r] = err
					return
				}
				sent[r] += n
				if n == 0 {
					// Nothing left, or the rest is locked by another relay:
					// done when the backlog says so.
					left, err := db.OutboxBacklog(ctx)
					if err != nil {
						errs[r] = err
						return
					}
					if left == 0 {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			errs[r] = ctx.Err()
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("relay %d: %v", r, err)
		}
	}
	total := sent[0] + sent[1] + sent[2]
	if total != rows || len(published) != rows {
		t.Fatalf("relays sent %v = %d, %d distinct events published; want %d", sent, total, len(published), rows)
	}
	for id, n := range published {
		if n != 1 {
			t.Errorf("event %s published %d times", id, n)
		}
	}
	if left, err := db.OutboxBacklog(context.Background()); err != nil || left != 0 {
		t.Fatalf("backlog %d, %v; want 0", left, err)
	}
	t.Logf("batches per relay: sent %v", sent)
}

func TestRelayBatchFailingPublishLeavesRowsUnsent(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	ctx := context.Background()
	addEvents(t, db, 5)

	boom := errors.New("broker down")
	n, err := db.RelayBatch(ctx, 100, func(context.Context, []order.OutboxEvent) error { return boom })
	if n != 0 || !errors.Is(err, boom) {
		t.Fatalf("failing publish: %d, %v; want 0, broker down", n, err)
	}
	if left, err := db.OutboxBacklog(ctx); err != nil || left != 5 {
		t.Fatalf("backlog %d, %v; want 5", left, err)
	}

	var got []order.OutboxEvent
	n, err = db.RelayBatch(ctx, 100, func(_ context.Context, evs []order.OutboxEvent) error { got = evs; return nil })
	if n != 5 || err != nil || len(got) != 5 {
		t.Fatalf("relay: %d (%d events), %v; want 5", n, len(got), err)
	}
	for i, e := range got {
		if e.RoutingKey != "order.failed" || e.Type != "waitingroom.v1.OrderFailed" ||
			string(e.Payload) != "payload-"+e.EventID || e.OccurredAt.IsZero() {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if left, err := db.OutboxBacklog(ctx); err != nil || left != 0 {
		t.Fatalf("backlog %d, %v; want 0", left, err)
	}
	calls := 0
	n, err = db.RelayBatch(ctx, 100, func(context.Context, []order.OutboxEvent) error { calls++; return nil })
	if n != 0 || err != nil || calls != 0 {
		t.Fatalf("empty outbox: %d, %v, %d publish calls; want 0, nil, 0", n, err, calls)
	}
}

func TestAddEventDuplicate(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	e := event("dup")
	if ok, err := db.AddEvent(ctx, e); !ok || err != nil {
		t.Fatalf("first AddEvent = %v, %v; want true", ok, err)
	}
	e.Payload = []byte("other")
	if ok, err := db.AddEvent(ctx, e); ok || err != nil {
		t.Fatalf("second AddEvent = %v, %v; want false, nil", ok, err)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox WHERE event_id = 'dup' AND payload = 'payload-dup'::bytea`); n != 1 {
		t.Fatalf("%d rows with the first payload, want 1", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
}
