package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// requestsCounted is how many requests the engine's request histogram
// holds for the position route with code.
func (h *harness) requestsCounted(code string) uint64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != "waitingroom_http_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "route") == "/api/v1/queues/:queueId/position" && label(m, "method") == "GET" && label(m, "code") == code {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestTheFastPathAnswersAsTheEngine: a poll with a ticket the frontier
// can answer is served in front of the engine with the engine's answer:
// the same view (but the jittered polling hint), the same headers, counted
// in the same request, position and read metrics. A cross-origin request
// (Origin) goes through the engine, and so does one near the front.
func TestTheFastPathAnswersAsTheEngine(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := h.newQueue(map[string]any{"admissionRatePerSec": 10})
	tickets := h.fillLine(q, 100)
	h.pollWith(q, userID(60), tickets[60])
	for deadline := time.Now().Add(3 * time.Second); h.frontiers.Lookup(q) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no frontier after 3 s")
		}
	}
	jwt := h.token(userID(60), "")
	poll := func(extra ...string) response {
		t.Helper()
		r, err := h.do(http.MethodGet, "/api/v1/queues/"+q+"/position", jwt, nil, append([]string{"X-Queue-Ticket", tickets[60]}, extra...)...)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("poll: %v %d %s", err, r.status, r.body)
		}
		return r
	}
	view := func(r response) map[string]any {
		var v map[string]any
		r.json(t, &v)
		if v["retryAfterMs"] == nil {
			t.Fatalf("no retryAfterMs in %s", r.body)
		}
		delete(v, "retryAfterMs")
		return v
	}
	n0, front0 := h.requestsCounted("200"), h.reads("frontier")
	fast := poll()
	viaEngine := poll("Origin", "https://shop.example")
	a, b := view(fast), view(viaEngine)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) || a["position"] != 61.0 || a["ticket"] != tickets[60] {
		t.Fatalf("fast path %s\nengine    %s", ja, jb)
	}
	for _, hd := range []string{"Content-Type", "Cache-Control"} {
		if fast.header.Get(hd) != viaEngine.header.Get(hd) {
			t.Errorf("%s: fast %q, engine %q", hd, fast.header.Get(hd), viaEngine.header.Get(hd))
		}
	}
	if fast.header.Get("Retry-After") == "" {
		t.Error("no Retry-After from the fast path")
	}
	if got := h.requestsCounted("200") - n0; got != 2 {
		t.Fatalf("%d polls in the request metrics, want 2", got)
	}
	if got := h.reads("frontier") - front0; got != 2 {
		t.Fatalf("%d frontier reads counted, want 2 (both polls were answered from it)", got)
	}
	// Near the front (two batches of 1 at 10/s): the engine, and Redis.
	store0 := h.reads("store")
	r, st := h.pollWith(q, userID(1), tickets[1])
	if r.status != http.StatusOK || st.Position != 2 || h.reads("store") != store0+1 {
		t.Fatalf("near the front: %d %+v, store reads %d -> %d", r.status, st, store0, h.reads("store"))
	}
}
