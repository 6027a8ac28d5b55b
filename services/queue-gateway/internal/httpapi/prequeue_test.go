package httpapi_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// drawBody is the draw object of the admin and public queue views.
type drawBody struct {
	State      string `json:"state"`
	SeedSHA256 string `json:"seedSha256"`
	Seed       string `json:"seed"`
	PreQueued  int64  `json:"preQueued"`
	Placed     int64  `json:"placed"`
	StartedAt  string `json:"startedAt"`
}

type scheduledBody struct {
	StartsAt string    `json:"startsAt"`
	Draw     *drawBody `json:"draw"`
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestPreQueueOverHTTP: a queue with startsAt answers enter and position
// with PRE_QUEUE, the start, the time left and the pre-queue's size, and a
// polling hint for after the start; the admin and public views publish the
// seed's hash and not the seed; a start time in the past is a 400 naming
// the field and writes nothing; once the start has come (the first enter
// after it closes the pre-queue) a changed startsAt is 409 queue-started
// and the same one passes.
func TestPreQueueOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	admin := h.admin()
	starts := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
	q := h.newQueue(map[string]any{"startsAt": starts.Format(time.RFC3339Nano)})
	path := "/admin/v1/queues/" + q

	for i, u := range []string{"a", "b", "c"} {
		r, st, err := h.enter(q, u)
		if err != nil || r.status != http.StatusOK {
			t.Fatalf("enter %s: %d %v", u, r.status, err)
		}
		if st.State != "PRE_QUEUE" || st.PreQueued != int64(i+1) || st.Position != 0 || st.StartsAt != starts.Format(time.RFC3339Nano) {
			t.Errorf("enter %s: %+v", u, st)
		}
		if st.StartsInMs <= 0 || st.StartsInMs > 1500 {
			t.Errorf("enter %s: startsInMs %d, want in (0, 1500]", u, st.StartsInMs)
		}
		// The next poll falls after the start, within the spread (1 s for
		// a small pre-queue) and half a second of settling.
		if st.RetryAfterMs < st.StartsInMs+500 || st.RetryAfterMs > st.StartsInMs+1500 {
			t.Errorf("enter %s: retryAfterMs %d with the start %d ms away", u, st.RetryAfterMs, st.StartsInMs)
		}
		if secs, _ := strconv.Atoi(r.header.Get("Retry-After")); secs < 1 {
			t.Errorf("enter %s: Retry-After %q", u, r.header.Get("Retry-After"))
		}
	}
	if _, st := h.position(q, "b"); st.State != "PRE_QUEUE" || st.PreQueued != 3 {
		t.Errorf("position of b: %+v", st)
	}

	var admin1 scheduledBody
	h.must(http.MethodGet, path, admin, nil).json(t, &admin1)
	if admin1.StartsAt != starts.Format(time.RFC3339Nano) || admin1.Draw == nil || admin1.Draw.State != "SCHEDULED" ||
		!hex64.MatchString(admin1.Draw.SeedSHA256) || admin1.Draw.Seed != "" || admin1.Draw.PreQueued != 3 {
		t.Fatalf("admin view before the start: %+v %+v", admin1, admin1.Draw)
	}
	var public scheduledBody
	h.must(http.MethodGet, "/api/v1/queues/"+q, "", nil).json(t, &public)
	if public.Draw == nil || public.Draw.SeedSHA256 != admin1.Draw.SeedSHA256 || public.Draw.Seed != "" || public.StartsAt != admin1.StartsAt {
		t.Errorf("public view before the start: %+v %+v", public, public.Draw)
	}

	r := h.must(http.MethodPut, path, admin, map[string]any{"startsAt": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)})
	if p := r.problem(t, http.StatusBadRequest, "validation-failed"); len(p.Errors) != 1 || p.Errors[0].Field != "startsAt" {
		t.Errorf("a start in the past: %+v", p)
	}
	r = h.must(http.MethodPut, path, admin, map[string]any{"startsAt": "soon"})
	r.problem(t, http.StatusBadRequest, "validation-failed")

	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	if r, st, err := h.enter(q, "d"); err != nil || st.State != "WAITING" || st.Position != 1 {
		t.Fatalf("enter after the start: %d %+v %v", r.status, st, err)
	}
	if _, st := h.position(q, "a"); st.State != "PRE_QUEUE" || st.StartsInMs != 0 {
		t.Errorf("a pre-queued person before the draw places them: %+v", st)
	}
	r = h.must(http.MethodPut, path, admin, map[string]any{"startsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	r.problem(t, http.StatusConflict, "queue-started")
	r = h.must(http.MethodPut, path, admin, map[string]any{"startsAt": nil})
	r.problem(t, http.StatusConflict, "queue-started")
	r = h.must(http.MethodPut, path, admin, map[string]any{"startsAt": starts.Format(time.RFC3339Nano), "admissionRatePerSec": 50})
	var after scheduledBody
	r.json(t, &after)
	if r.status != http.StatusOK || after.StartsAt != admin1.StartsAt || after.Draw.State != "DRAWING" || after.Draw.PreQueued != 3 || after.Draw.StartedAt == "" {
		t.Errorf("repeating the start time after it: %d %s", r.status, r.body)
	}
}

// TestDrawTimesAreAbsentUntilTheyHappen: the public and admin views of a
// queue whose start is still ahead carry no startedAt and no drawnAt (the
// store's 0 used to come out as 1970-01-01); once the pre-queue closes
// startedAt is set, once the draw is done drawnAt too.
func TestDrawTimesAreAbsentUntilTheyHappen(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	admin := h.admin()
	starts := time.Now().Add(time.Second).UTC().Truncate(time.Millisecond)
	q := h.newQueue(map[string]any{"startsAt": starts.Format(time.RFC3339Nano)})
	pre := []string{"a", "b", "c"}
	for _, u := range pre {
		if r, st, err := h.enter(q, u); err != nil || st.State != "PRE_QUEUE" {
			t.Fatalf("enter %s: %d %+v %v", u, r.status, st, err)
		}
	}
	// views reads the draw object of the public and the admin view as
	// their JSON has it.
	views := func() [2]map[string]any {
		t.Helper()
		var out [2]map[string]any
		for i, r := range []response{
			h.must(http.MethodGet, "/api/v1/queues/"+q, "", nil),
			h.must(http.MethodGet, "/admin/v1/queues/"+q, admin, nil),
		} {
			var v struct {
				Draw map[string]any `json:"draw"`
			}
			r.json(t, &v)
			if r.status != http.StatusOK || v.Draw == nil {
				t.Fatalf("view %d: %d %s", i, r.status, r.body)
			}
			out[i] = v.Draw
		}
		return out
	}
	// viewsIn reads both views once they show the draw in state: the public
	// view is a copy up to a second old (app.PublicQueue).
	viewsIn := func(state string) [2]map[string]any {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for {
			v := views()
			if (v[0]["state"] == state && v[1]["state"] == state) || time.Now().After(deadline) {
				return v
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// at reads a draw time, which must be a time of this test's run.
	at := func(name string, d map[string]any) time.Time {
		t.Helper()
		s, ok := d[name].(string)
		if !ok {
			t.Fatalf("%s is %v, want a time", name, d[name])
		}
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || ts.Before(starts.Add(-time.Second)) || ts.After(time.Now().Add(time.Second)) {
			t.Fatalf("%s %q (%v): not a time of this test's run", name, s, err)
		}
		return ts
	}
	absent := 0
	for i, d := range views() {
		_, started := d["startedAt"]
		_, drawn := d["drawnAt"]
		if d["state"] != "SCHEDULED" || started || drawn {
			t.Errorf("view %d before the start: %v; want SCHEDULED without startedAt and drawnAt", i, d)
			continue
		}
		absent++
	}
	if absent != 2 {
		t.Fatalf("%d of 2 views before the start omit both times", absent)
	}

	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	if r, st, err := h.enter(q, "late"); err != nil || st.State != "WAITING" {
		t.Fatalf("enter after the start: %d %+v %v", r.status, st, err)
	}
	for i, d := range viewsIn("DRAWING") {
		if _, drawn := d["drawnAt"]; d["state"] != "DRAWING" || drawn {
			t.Errorf("view %d while drawing: %v; want DRAWING without drawnAt", i, d)
		}
		if s := at("startedAt", d); s.Before(starts) {
			t.Errorf("view %d: startedAt %v before the start %v", i, s, starts)
		}
	}

	epoch, err := h.store.AcquireLease(ctx, q, "draw-test", 10*time.Second)
	if err != nil || epoch < 1 {
		t.Fatalf("lease: %d %v", epoch, err)
	}
	w, err := h.store.StartDraw(ctx, q, epoch, queue.DrawTotals{})
	if err != nil || len(w.Remaining) != len(pre) {
		t.Fatalf("start draw: %+v %v", w, err)
	}
	order, err := queue.DrawOrder(w.Seed, w.Remaining)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.PlaceDrawn(ctx, q, epoch, order); err != nil {
		t.Fatal(err)
	}
	if w, err := h.store.FinishDraw(ctx, q, epoch, queue.DrawTotals{}); err != nil || w.State != queue.DrawDrawn || w.Placed != 3 {
		t.Fatalf("finish: %+v %v", w, err)
	}
	set := 0
	for i, d := range viewsIn("DRAWN") {
		started, drawn := at("startedAt", d), at("drawnAt", d)
		if d["state"] != "DRAWN" || drawn.Before(started) {
			t.Errorf("view %d after the draw: %v; want DRAWN, drawnAt not before startedAt", i, d)
			continue
		}
		set++
	}
	if set != 2 {
		t.Fatalf("%d of 2 views after the draw carry both times", set)
	}
}
