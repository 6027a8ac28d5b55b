package pg_test

import (
	"context"
	"sync"
	"testing"
)

func TestIdempotency(t *testing.T) {
	t.Parallel()
	db, raw, _ := newDB(t)
	ctx := context.Background()

	res, fresh, err := db.BeginIdempotent(ctx, "u1", "k1")
	if err != nil || !fresh || res.Done {
		t.Fatalf("first Begin = %+v, fresh %v, %v; want fresh", res, fresh, err)
	}
	res, fresh, err = db.BeginIdempotent(ctx, "u1", "k1")
	if err != nil || fresh || res.Done {
		t.Fatalf("Begin while in progress = %+v, fresh %v, %v; want not fresh, not done", res, fresh, err)
	}
	// Another user's key of the same name is another request.
	if _, fresh, err := db.BeginIdempotent(ctx, "u2", "k1"); err != nil || !fresh {
		t.Fatalf("Begin for another user = fresh %v, %v; want fresh", fresh, err)
	}

	if err := db.FinishIdempotent(ctx, "u1", "k1", 201, []byte(`{"id":"o1"}`)); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	for range 2 { // replays are stable
		res, fresh, err = db.BeginIdempotent(ctx, "u1", "k1")
		if err != nil || fresh || !res.Done || res.Status != 201 || string(res.Body) != `{"id":"o1"}` {
			t.Fatalf("replay = %+v, fresh %v, %v; want done 201 with the body", res, fresh, err)
		}
	}
	// Abandoning a finished request changes nothing.
	if err := db.AbandonIdempotent(ctx, "u1", "k1"); err != nil {
		t.Fatalf("Abandon finished: %v", err)
	}
	if res, _, _ := db.BeginIdempotent(ctx, "u1", "k1"); !res.Done || res.Status != 201 {
		t.Fatalf("after abandoning a finished key: %+v, want the stored outcome", res)
	}

	// Abandoning an unfinished one lets the client retry.
	if err := db.AbandonIdempotent(ctx, "u2", "k1"); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	if _, fresh, err := db.BeginIdempotent(ctx, "u2", "k1"); err != nil || !fresh {
		t.Fatalf("Begin after Abandon = fresh %v, %v; want fresh", fresh, err)
	}

	// A claim whose request died long ago is taken over.
	if _, err := raw.Exec(`UPDATE idempotency SET created_at = now() - interval '2 minutes' WHERE user_id = 'u2'`); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := db.BeginIdempotent(ctx, "u2", "k1"); err != nil || !fresh {
		t.Fatalf("Begin on a stale claim = fresh %v, %v; want fresh", fresh, err)
	}
	if n := count(t, raw, `SELECT count(*) FROM idempotency`); n != 2 {
		t.Fatalf("%d idempotency rows, want 2", n)
	}
}

func TestIdempotencyConcurrentBeginOneWins(t *testing.T) {
	t.Parallel()
	db, _, _ := newDB(t)
	const n = 20
	fresh := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, fresh[i], errs[i] = db.BeginIdempotent(context.Background(), "u", "k")
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Begin %d: %v", i, errs[i])
		}
		if fresh[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d fresh claims, want 1", winners)
	}
}
