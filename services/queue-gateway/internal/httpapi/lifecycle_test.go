package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// lifecycleList is GET /admin/v1/queues.
func lifecycleList(h *harness) []string {
	h.t.Helper()
	r := h.must(http.MethodGet, "/admin/v1/queues", h.admin(), nil)
	var body struct {
		Queues []string `json:"queues"`
	}
	if r.status != http.StatusOK {
		h.t.Fatalf("list queues: %d %s", r.status, r.body)
	}
	r.json(h.t, &body)
	return body.Queues
}

// lifecycleKeys lists every key of queue q.
func lifecycleKeys(h *harness, q string) []string {
	h.t.Helper()
	ctx := context.Background()
	var keys []string
	iter := h.rdb.Scan(ctx, 0, redisstore.KeysFor(q).Prefix()+"*", 10000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		h.t.Fatal(err)
	}
	return keys
}

// A PUT that is refused creates nothing: no configuration, no registration
// (a registered id without configuration would be served by every
// dispatcher and listed here forever).
func TestInvalidPutLeavesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.admin()
	cases := []struct {
		name   string
		body   string
		fields []string
	}{
		// Refused while decoding, before the store is called.
		{"unknown field", `{"colour":"red"}`, []string{"colour"}},
		// Refused by the store's update closure (range checks on the merged config).
		{"rate out of range", `{"admissionRatePerSec":-1}`, []string{"admissionRatePerSec"}},
		// Valid fields, invalid together.
		{"spread not below half the TTL", `{"tokenTtlSeconds":2,"activationSpreadMs":1000}`, []string{"activationSpreadMs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := testenv.ID(t)
			t.Cleanup(func() { _ = h.store.Purge(context.Background(), q) })
			path := "/admin/v1/queues/" + q
			p := h.must(http.MethodPut, path, admin, c.body).problem(t, http.StatusBadRequest, "validation-failed")
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field)
			}
			if !slices.Equal(got, c.fields) {
				t.Errorf("fields %v, want %v", got, c.fields)
			}
			if keys := lifecycleKeys(h, q); len(keys) != 0 {
				t.Errorf("keys written by a refused PUT: %v", keys)
			}
			if ok := h.rdb.SIsMember(context.Background(), redisstore.QueuesKey, q).Val(); ok {
				t.Errorf("%s registered in %s by a refused PUT", q, redisstore.QueuesKey)
			}
			if slices.Contains(lifecycleList(h), q) {
				t.Errorf("%s listed by GET /admin/v1/queues", q)
			}
			h.must(http.MethodGet, path, admin, nil).problem(t, http.StatusNotFound, "queue-not-found")
		})
	}
}

// An id listed without configuration (a leftover of an older version, or an
// interrupted delete) can be removed by an operator.
func TestDeleteRemovesAListedIdWithoutConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	q := testenv.ID(t)
	t.Cleanup(func() { _ = h.store.Purge(context.Background(), q) })
	if err := h.rdb.SAdd(ctx, redisstore.QueuesKey, q).Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(lifecycleList(h), q) {
		t.Fatalf("%s not listed after SADD", q)
	}
	h.must(http.MethodGet, "/admin/v1/queues/"+q, h.admin(), nil).problem(t, http.StatusNotFound, "queue-not-found")
	if r := h.must(http.MethodDelete, "/admin/v1/queues/"+q, h.admin(), nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s, want 204", r.status, r.body)
	}
	if slices.Contains(lifecycleList(h), q) {
		t.Fatalf("%s still listed after DELETE", q)
	}
	if keys := lifecycleKeys(h, q); len(keys) != 0 {
		t.Fatalf("DELETE of an unconfigured id wrote keys: %v", keys)
	}
	// Now neither listed nor configured: a second DELETE is a 404.
	h.must(http.MethodDelete, "/admin/v1/queues/"+q, h.admin(), nil).problem(t, http.StatusNotFound, "queue-not-found")
}

// admissionHeld tells the operator why an open queue admits nobody; it is
// absent, not empty, while the queue admits.
func TestAdminViewShowsAdmissionHeldOnlyWhenHeld(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	q := h.newQueue(nil)
	dispatch := redisstore.KeysFor(q).Dispatch()
	cases := []struct {
		name string
		set  func() error
		want any // the field's JSON value; nil: absent
	}{
		{"no dispatch state", func() error { return nil }, nil},
		{"held for the outbox", func() error { return h.rdb.HSet(ctx, dispatch, "heldReason", "OUTBOX_BACKLOG").Err() }, "OUTBOX_BACKLOG"},
		{"admitting again", func() error { return h.rdb.HSet(ctx, dispatch, "heldReason", "").Err() }, nil},
		{"held again", func() error { return h.rdb.HSet(ctx, dispatch, "heldReason", "OUTBOX_BACKLOG").Err() }, "OUTBOX_BACKLOG"},
		{"field removed", func() error { return h.rdb.HDel(ctx, dispatch, "heldReason").Err() }, nil},
	}
	for _, c := range cases { // in order: each step changes the same queue
		if err := c.set(); err != nil {
			t.Fatal(err)
		}
		r := h.must(http.MethodGet, "/admin/v1/queues/"+q, h.admin(), nil)
		var v map[string]any
		r.json(t, &v)
		if r.status != http.StatusOK || v["queueId"] != q {
			t.Fatalf("%s: GET %d %v", c.name, r.status, v)
		}
		got, present := v["admissionHeld"]
		if c.want == nil && present {
			t.Errorf("%s: admissionHeld %v present, want absent", c.name, got)
		}
		if c.want != nil && got != c.want {
			t.Errorf("%s: admissionHeld %v (present %v), want %v", c.name, got, present, c.want)
		}
	}
}
