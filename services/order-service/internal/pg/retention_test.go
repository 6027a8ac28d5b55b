package pg_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// seedRetention writes outbox and idempotency rows of known ages:
// oldSent and oldKeys are two days old; the rest must survive a one-day
// retention (recent rows, and unsent events of any age).
func seedRetention(t *testing.T, raw *sql.DB, tag string, oldSent, oldKeys int) {
	t.Helper()
	for _, q := range []struct {
		stmt string
		args []any
	}{
		{`INSERT INTO outbox (event_id, routing_key, type, payload, occurred_at, created_at, sent_at)
			SELECT $1 || '-old-' || g, 'order.created', 't', '', now() - interval '2 days', now() - interval '2 days', now() - interval '2 days'
			FROM generate_series(1, $2) g`, []any{tag, oldSent}},
		{`INSERT INTO outbox (event_id, routing_key, type, payload, occurred_at, created_at, sent_at)
			SELECT $1 || '-recent-' || g, 'order.created', 't', '', now(), now(), now() - interval '1 hour'
			FROM generate_series(1, 7) g`, []any{tag}},
		{`INSERT INTO outbox (event_id, routing_key, type, payload, occurred_at, created_at)
			SELECT $1 || '-unsent-' || g, 'order.failed', 't', '', now() - interval '3 days', now() - interval '3 days'
			FROM generate_series(1, 5) g`, []any{tag}},
		// Half of the old keys finished, half abandoned mid-request.
		{`INSERT INTO idempotency (user_id, key, status, body, created_at)
			SELECT 'u-' || g, $1 || '-old', CASE WHEN g % 2 = 0 THEN 201 END, CASE WHEN g % 2 = 0 THEN '{}'::bytea END, now() - interval '2 days'
			FROM generate_series(1, $2) g`, []any{tag, oldKeys}},
		{`INSERT INTO idempotency (user_id, key, status, body, created_at)
			SELECT 'u-' || g, $1 || '-recent', 201, '{}'::bytea, now() - interval '23 hours'
			FROM generate_series(1, 4) g`, []any{tag}},
	} {
		if _, err := raw.Exec(q.stmt, q.args...); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

func TestPruneDeletesOnlyWhatIsPastRetention(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()
	seedRetention(t, raw, "a", 2500, 1200)
	dayAgo := time.Now().Add(-24 * time.Hour)

	// A zero cut-off deletes nothing (retention off).
	if p, err := db.Prune(ctx, time.Time{}, time.Time{}, 1000); err != nil || p != (order.Pruned{}) {
		t.Fatalf("Prune with retention off = %+v, %v; want nothing", p, err)
	}
	p, err := db.Prune(ctx, dayAgo, dayAgo, 1000) // three batches per table
	if err != nil || p != (order.Pruned{Outbox: 2500, Idempotency: 1200}) {
		t.Fatalf("Prune = %+v, %v; want 2500 outbox and 1200 idempotency rows", p, err)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox WHERE event_id LIKE 'a-recent-%'`); n != 7 {
		t.Fatalf("%d recent sent events left, want 7", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`); n != 5 {
		t.Fatalf("%d unsent events left, want all 5 however old", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 12 {
		t.Fatalf("%d outbox rows left, want 12", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM idempotency`); n != 4 {
		t.Fatalf("%d idempotency rows left, want the 4 recent ones", n)
	}
	if p, err := db.Prune(ctx, dayAgo, dayAgo, 1000); err != nil || p != (order.Pruned{}) {
		t.Fatalf("second Prune = %+v, %v; want nothing left to delete", p, err)
	}
	// A pruned key is free again: the next request with it runs afresh.
	if _, fresh, err := db.BeginIdempotent(ctx, "u-2", "a-old"); err != nil || !fresh {
		t.Fatalf("BeginIdempotent on a pruned key = fresh %v, %v; want a fresh claim", fresh, err)
	}
}

func TestPruneConcurrentReplicasDeleteEachRowOnce(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	seedRetention(t, raw, "b", 3000, 900)
	dayAgo := time.Now().Add(-24 * time.Hour)

	const replicas = 4
	got := make([]order.Pruned, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { got[i], errs[i] = db.Prune(context.Background(), dayAgo, dayAgo, 100) })
	}
	wg.Wait()
	var sum order.Pruned
	for i := range replicas {
		if errs[i] != nil {
			t.Errorf("replica %d: %v", i, errs[i])
		}
		sum.Outbox += got[i].Outbox
		sum.Idempotency += got[i].Idempotency
	}
	if sum != (order.Pruned{Outbox: 3000, Idempotency: 900}) {
		t.Fatalf("replicas deleted %+v in all (%+v), want 3000 outbox and 900 idempotency rows", sum, got)
	}
	if n := count(t, raw, `SELECT count(*) FROM outbox`); n != 12 {
		t.Fatalf("%d outbox rows left, want 12", n)
	}
	if n := count(t, raw, `SELECT count(*) FROM idempotency`); n != 4 {
		t.Fatalf("%d idempotency rows left, want 4", n)
	}
}
