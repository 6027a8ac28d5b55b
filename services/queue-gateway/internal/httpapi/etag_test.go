package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestTwoOperatorsDoNotOverwriteEachOther: the admin API answers a queue
// with its ETag and takes it back in If-Match. A change made for a version
// that is no longer the queue's is refused 412 precondition-failed and
// writes nothing; ten operators sending a change for the same version at
// once: exactly one lands. If-None-Match: * creates only. A malformed
// precondition is 400. Without one, a write goes through as before.
func TestTwoOperatorsDoNotOverwriteEachOther(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	q := testenv.ID(t)
	t.Cleanup(func() { _ = h.store.Purge(context.Background(), q) })
	path := "/admin/v1/queues/" + q
	rate := func() float64 {
		var v struct {
			Rate float64 `json:"admissionRatePerSec"`
		}
		h.must(http.MethodGet, path, h.admin(), nil).json(t, &v)
		return v.Rate
	}

	if r := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 10}, "If-Match", "*"); r.status != 412 {
		t.Fatalf("If-Match on a queue that does not exist: %d, want 412 and nothing created", r.status)
	}
	if r := h.must(http.MethodGet, path, h.admin(), nil); r.status != 404 {
		t.Fatalf("after a refused create: GET %d, want 404", r.status)
	}
	created := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 10}, "If-None-Match", "*")
	first := created.header.Get("ETag")
	if created.status != 201 || len(first) < 3 {
		t.Fatalf("create with If-None-Match: *: %d, ETag %q", created.status, first)
	}
	if r := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 99}, "If-None-Match", "*"); r.status != 412 {
		t.Fatalf("a second create-only write: %d, want 412", r.status)
	} else {
		r.problem(t, 412, "precondition-failed")
	}
	if got := h.must(http.MethodGet, path, h.admin(), nil).header.Get("ETag"); got != first {
		t.Fatalf("GET's ETag %q, the create's %q: want the same", got, first)
	}

	a := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 50}, "If-Match", first)
	second := a.header.Get("ETag")
	if a.status != 200 || second == first || second == "" {
		t.Fatalf("operator A's change: %d, ETag %q (was %q)", a.status, second, first)
	}
	b := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 0}, "If-Match", first)
	b.problem(t, 412, "precondition-failed")
	if got := rate(); got != 50 {
		t.Fatalf("after B's stale change: rate %v, want A's 50", got)
	}
	if r := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 40}, "If-Match", `"nope", `+second); r.status != 200 {
		t.Fatalf("If-Match with a list holding the current tag: %d", r.status)
	}
	for _, bad := range [][]string{{"If-Match", `W/"` + second[1:]}, {"If-Match", "abc"}, {"If-None-Match", second}} {
		if r := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 1}, bad...); r.status != 400 {
			t.Errorf("%s: %s: %d, want 400", bad[0], bad[1], r.status)
		}
	}
	if got := rate(); got != 40 {
		t.Fatalf("after refused writes: rate %v, want 40", got)
	}

	// Ten operators at once, all for the same version: one lands.
	tag := h.must(http.MethodGet, path, h.admin(), nil).header.Get("ETag")
	statuses := make([]int, 10)
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			r, err := h.do(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 100 + i}, "If-Match", tag)
			statuses[i], errs[i] = r.status, err
		})
	}
	wg.Wait()
	won := -1
	for i := range 10 {
		if errs[i] != nil {
			t.Fatalf("operator %d: %v", i, errs[i])
		}
		switch statuses[i] {
		case 200:
			if won >= 0 {
				t.Fatalf("operators %d and %d both changed the same version", won, i)
			}
			won = i
		case 412:
		default:
			t.Fatalf("operator %d: %d, want 200 or 412", i, statuses[i])
		}
	}
	if won < 0 {
		t.Fatalf("no operator's change landed: %v", statuses)
	}
	if got := rate(); got != float64(100+won) {
		t.Fatalf("rate %v, want the one landed change's %d", got, 100+won)
	}
	if r := h.must(http.MethodPut, path, h.admin(), map[string]any{"admissionRatePerSec": 7}); r.status != 200 || rate() != 7 {
		t.Fatalf("a write without a precondition: %d, rate %v", r.status, rate())
	}
	t.Logf("10 concurrent changes of one version: operator %d's landed, 9 refused 412", won)
}
