package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

type queueBody struct {
	QueueID             string  `json:"queueId"`
	State               string  `json:"state"`
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`
	MaxActive           int64   `json:"maxActive"`
	MaxQueueSize        int64   `json:"maxQueueSize"`
	MaxWaitSeconds      int64   `json:"maxWaitSeconds"`
	TokenTTLSeconds     int64   `json:"tokenTtlSeconds"`
	ActivationSpreadMs  int64   `json:"activationSpreadMs"`
	MaxOrdersPerUser    int64   `json:"maxOrdersPerUser"`
	Waiting             int64   `json:"waiting"`
	Active              int64   `json:"active"`
	IssuedTotal         int64   `json:"issuedTotal"`
	MeasuredRatePerSec  float64 `json:"measuredRatePerSec"`
	Capacity            int64   `json:"capacity"`
}

func TestQueueAdminLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.admin()
	q := testenv.ID(t)
	t.Cleanup(func() { _ = h.store.Purge(context.Background(), q) })
	path := "/admin/v1/queues/" + q

	// Create with one knob: the rest are the documented defaults.
	r := h.must(http.MethodPut, path, admin, map[string]any{"maxQueueSize": 3})
	var v queueBody
	r.json(t, &v)
	d := queue.DefaultConfig()
	if r.status != http.StatusCreated || r.header.Get("Location") != path {
		t.Fatalf("create: %d Location %q", r.status, r.header.Get("Location"))
	}
	if v.State != "OPEN" || v.AdmissionRatePerSec != d.AdmissionRatePerSec || v.MaxQueueSize != 3 || v.MaxWaitSeconds != d.MaxWaitSeconds ||
		v.TokenTTLSeconds != d.TokenTTLSeconds || v.ActivationSpreadMs != d.ActivationSpreadMs || v.MaxActive != 0 || v.Capacity != 3 {
		t.Fatalf("created with %+v", v)
	}

	// Two people wait; the admin view counts them.
	for _, u := range []string{"a", "b"} {
		if r, _, err := h.enter(q, u); err != nil || r.status != http.StatusOK {
			t.Fatalf("enter %s: %d %v", u, r.status, err)
		}
	}
	// Update one knob live: the others keep their value.
	r = h.must(http.MethodPut, path, admin, map[string]any{"admissionRatePerSec": 12.5, "state": "PAUSED", "maxOrdersPerUser": 1})
	r.json(t, &v)
	if r.status != http.StatusOK || v.AdmissionRatePerSec != 12.5 || v.State != "PAUSED" || v.MaxQueueSize != 3 || v.Waiting != 2 || v.MaxOrdersPerUser != 1 {
		t.Fatalf("update: %d %+v", r.status, v)
	}
	// PAUSED still takes entries, and the cap of 3 applies at once.
	if r, _, _ := h.enter(q, "c"); r.status != http.StatusOK {
		t.Fatalf("enter into paused queue: %d", r.status)
	}
	r, _, _ = h.enter(q, "d")
	r.problem(t, http.StatusServiceUnavailable, "queue-full")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("queue-full without Retry-After")
	}
	// Raising the cap takes effect without a restart.
	h.must(http.MethodPut, path, admin, map[string]any{"maxQueueSize": 4})
	if r, _, _ := h.enter(q, "d"); r.status != http.StatusOK {
		t.Fatalf("enter after raising the cap: %d", r.status)
	}

	// The public view shows figures, not knobs, and whether a new entrant
	// must solve a challenge (the page's cue to solve one before entering).
	r = h.must(http.MethodGet, "/api/v1/queues/"+q, "", nil)
	var pub map[string]any
	r.json(t, &pub)
	if r.status != http.StatusOK || pub["waiting"] != float64(4) || pub["state"] != "PAUSED" || pub["admissionRatePerSec"] != 12.5 || pub["enterChallenge"] != "NONE" || len(pub) != 6 {
		t.Fatalf("public view: %d %v", r.status, pub)
	}

	// The list names it.
	r = h.must(http.MethodGet, "/admin/v1/queues", admin, nil)
	if !strings.Contains(string(r.body), `"`+q+`"`) {
		t.Fatalf("queue list %s does not name %s", r.body, q)
	}

	// DELETE closes and drops the line.
	if r = h.must(http.MethodDelete, path, admin, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d", r.status)
	}
	r = h.must(http.MethodGet, path, admin, nil)
	r.json(t, &v)
	if v.State != "CLOSED" || v.Waiting != 0 || h.zcard(q) != 0 {
		t.Fatalf("after delete: state %s waiting %d", v.State, v.Waiting)
	}
	r, _, _ = h.enter(q, "e")
	r.problem(t, http.StatusConflict, "queue-closed")
	if _, st := h.position(q, "a"); st.State != "NOT_IN_QUEUE" || st.QueueState != "CLOSED" {
		t.Fatalf("position after delete: %+v", st)
	}
	h.must(http.MethodDelete, "/admin/v1/queues/none-"+q, admin, nil).problem(t, http.StatusNotFound, "queue-not-found")
	h.must(http.MethodGet, "/admin/v1/queues/none-"+q, admin, nil).problem(t, http.StatusNotFound, "queue-not-found")
}
