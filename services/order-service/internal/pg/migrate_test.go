package pg_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

func appliedVersions(t *testing.T, raw *sql.DB) []int64 {
	t.Helper()
	rows, err := raw.Query(`SELECT version_id FROM goose_db_version WHERE is_applied ORDER BY id`)
	if err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	defer rows.Close()
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func checkSchema(t *testing.T, raw *sql.DB) {
	t.Helper()
	if got, want := appliedVersions(t, raw), []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("applied versions %v, want %v (each once)", got, want)
	}
	n := count(t, raw, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name IN ('products', 'orders', 'outbox', 'idempotency', 'queue_changes')`)
	if n != 5 {
		t.Fatalf("%d of the 5 tables exist", n)
	}
	// The indexes built concurrently (retention, one resolution per
	// attempt) must have come out valid.
	n = count(t, raw, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname IN ('outbox_sent_at_idx', 'idempotency_created_at_idx', 'outbox_attempt_key') AND i.indisvalid`)
	if n != 3 {
		t.Fatalf("%d of the 3 indexes built concurrently exist and are valid", n)
	}
}

func TestMigrationsRunTwice(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresURL(t)
	raw := rawDB(t, dsn)
	first := open(t, dsn, testOptions(t))
	checkSchema(t, raw)
	mustUpsert(t, first, product("p1", "q1", 3))

	open(t, dsn, testOptions(t)) // nothing pending: a no-op
	checkSchema(t, raw)
	if n := count(t, raw, `SELECT count(*) FROM products`); n != 1 {
		t.Fatalf("%d products after the second Open, want the 1 from before", n)
	}
}

func TestMigrationsConcurrently(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresURL(t)
	const replicas = 3
	errs := make([]error, replicas)
	dbs := make([]*pg.DB, replicas)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replicas {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dbs[i], errs[i] = pg.Open(ctx, dsn, testOptions(t))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: Open: %v", i, err)
			continue
		}
		t.Cleanup(func() { _ = dbs[i].Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	checkSchema(t, rawDB(t, dsn))
}
