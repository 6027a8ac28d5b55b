package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestShardsKnob: a queue created with shards = 3 shows its three lines in
// the admin view and answers places over the whole queue; its line count
// cannot change while people are in it (409 shards-fixed, nothing
// changes), a count out of range is 400 and changes nothing, and once it
// is empty the count changes.
func TestShardsKnob(t *testing.T) {
	h := newHarness(t)
	q := h.newQueue(map[string]any{"shards": 3, "state": "PAUSED"})
	const n = 30
	for i := range n {
		r, st, err := h.enter(q, fmt.Sprintf("sh-%02d", i))
		if err != nil || r.status != http.StatusOK || st.State != "WAITING" || st.Ticket == "" {
			t.Fatalf("enter %d: %d %+v %v", i, r.status, st, err)
		}
		// The total is the lines' lengths of up to 100 ms ago, scaled by
		// how the entrant's own line moved since (docs/DESIGN.md): an
		// estimate, within about a fifth. Which ids share a line depends
		// on the queue's line key, so the exact figures vary from run to
		// run.
		if st.Position < 1 || st.Position > st.Total || st.Total > int64(i+1)*6/5+3 {
			t.Fatalf("enter %d: place %d of %d", i, st.Position, st.Total)
		}
	}
	type lineView struct {
		Line    int   `json:"line"`
		Waiting int64 `json:"waiting"`
	}
	type view struct {
		Shards  int        `json:"shards"`
		Waiting int64      `json:"waiting"`
		Lines   []lineView `json:"lines"`
	}
	get := func() view {
		t.Helper()
		var v view
		r := h.must(http.MethodGet, "/admin/v1/queues/"+q, h.admin(), nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET queue: %d %s", r.status, r.body)
		}
		r.json(t, &v)
		return v
	}
	v := get()
	var sum int64
	for _, l := range v.Lines {
		sum += l.Waiting
	}
	if v.Shards != 3 || v.Waiting != n || len(v.Lines) != 3 || sum != n {
		t.Fatalf("admin view: %+v; want shards 3, %d waiting over 3 lines", v, n)
	}
	time.Sleep(150 * time.Millisecond) // the other lines' lengths are read at most every 100 ms
	if _, st := h.position(q, "sh-29"); st.Total != n || st.Position < 1 || st.Position > n {
		t.Fatalf("position of the last: %+v; want a place of %d", st, n)
	}

	h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), map[string]any{"shards": 2}).problem(t, http.StatusConflict, "shards-fixed")
	p := h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), map[string]any{"shards": 65}).problem(t, http.StatusBadRequest, "validation-failed")
	if len(p.Errors) != 1 || p.Errors[0].Field != "shards" {
		t.Fatalf("shards 65: errors %+v, want one on shards", p.Errors)
	}
	if v := get(); v.Shards != 3 || v.Waiting != n || len(v.Lines) != 3 {
		t.Fatalf("after the refused changes: %+v; want shards 3, %d waiting", v, n)
	}
	if r, _, err := h.enter(q, "sh-late"); err != nil || r.status != http.StatusOK {
		t.Fatalf("enter after the refused change (the lines' hold lifted): %d %v", r.status, err)
	}

	// Empty, the count changes.
	for i := range n {
		if r := h.must(http.MethodDelete, "/api/v1/queues/"+q+"/position", h.token(fmt.Sprintf("sh-%02d", i), ""), nil); r.status != http.StatusNoContent {
			t.Fatalf("leave %d: %d %s", i, r.status, r.body)
		}
	}
	h.must(http.MethodDelete, "/api/v1/queues/"+q+"/position", h.token("sh-late", ""), nil)
	if r := h.must(http.MethodPut, "/admin/v1/queues/"+q, h.admin(), map[string]any{"shards": 2}); r.status != http.StatusOK {
		t.Fatalf("shards 3 -> 2 once empty: %d %s", r.status, r.body)
	}
	if v := get(); v.Shards != 2 || v.Waiting != 0 || len(v.Lines) != 2 {
		t.Fatalf("after the change: %+v; want shards 2 over 2 lines", v)
	}
}
