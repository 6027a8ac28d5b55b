package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// event is an OrderFailed for token id, attempt "o-" + id; its event id is id + ".failed.o-" + id.
func event(id string) order.Failed {
	return order.Failed{QueueID: "q1", UserID: "u1", TokenID: id, OrderID: "o-" + id, Reason: order.ReasonDatabaseError,
		Restorable: true, RemainingTTL: time.Minute, At: time.Now()}
}

// decodeFailed reads an outbox payload back as OrderFailed.
func decodeFailed(t *testing.T, e order.OutboxEvent) *waitingroomv1.OrderFailed {
	t.Helper()
	var m waitingroomv1.OrderFailed
	if err := proto.Unmarshal(e.Payload, &m); err != nil {
		t.Fatalf("event %s: payload %x: %v", e.EventID, e.Payload, err)
	}
	return &m
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
		m := decodeFailed(t, e)
		if e.RoutingKey != "order.failed" || e.Type != "waitingroom.v1.OrderFailed" || e.OccurredAt.IsZero() ||
			m.GetEventId() != e.EventID || e.EventID != m.GetTokenId()+".failed.o-"+m.GetTokenId() || m.GetRemainingTtlMs() != 60_000 {
			t.Errorf("event %d: %+v, payload %v", i, e, m)
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
	e.RemainingTTL = time.Second // the same fact, recorded later
	if ok, err := db.AddEvent(ctx, e); ok || err != nil {
		t.Fatalf("second AddEvent = %v, %v; want false, nil", ok, err)
	}
	var first order.OutboxEvent
	if err := raw.QueryRow(`SELECT event_id, payload FROM outbox WHERE event_id = 'dup.failed.o-dup'`).Scan(&first.EventID, &first.Payload); err != nil {
		t.Fatal(err)
	}
	if m := decodeFailed(t, first); m.GetRemainingTtlMs() != 60_000 {
		t.Fatalf("stored %v, want the first event's (60000 ms left)", m)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
}
