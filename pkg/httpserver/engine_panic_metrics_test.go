package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

// TestPanicsAreCountedInRequestMetrics: a handler panic answers 500 but
// must also be observed in waitingroom_http_request_duration_seconds, or
// error-rate dashboards and alerts never see panics.
func TestPanicsAreCountedInRequestMetrics(t *testing.T) {
	r := newRig(t, httpserver.EngineOptions{})
	for range 3 {
		if w := r.do(httptest.NewRequest(http.MethodGet, "/panic", nil)); w.Code != 500 {
			t.Fatalf("status %d, want 500", w.Code)
		}
	}
	r.do(httptest.NewRequest(http.MethodGet, "/items/1", nil))
	got := r.observations(t)
	if got["/panic GET 500"] != 3 || got["/items/:id GET 200"] != 1 || len(got) != 2 {
		t.Errorf("observations %v, want /panic GET 500 x3 and /items/:id GET 200 x1", got)
	}
}
