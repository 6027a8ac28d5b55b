package httpserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// A request beyond its key's limit is answered 429 problem+json with
// Retry-After before the handler runs, and counted; one within it reaches
// the handler, and its in-flight slot is given back when the handler ends.
func TestThrottleAnswersFromMemoryBeforeTheHandler(t *testing.T) {
	gin.SetMode(gin.TestMode)
	lim, err := throttle.New(throttle.Options{PerSec: 1, Burst: 3, InFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	refused, err := httpserver.NewThrottled(reg)
	if err != nil {
		t.Fatal(err)
	}
	var reached atomic.Int64
	release := make(chan struct{})
	e := gin.New()
	e.GET("/x", httpserver.Throttle(lim, func(c *gin.Context) string { return c.GetHeader("X-Key") }, "slow down", refused.By("test")),
		func(c *gin.Context) {
			reached.Add(1)
			if c.Query("hold") != "" {
				<-release
			}
			c.Status(http.StatusNoContent)
		})
	get := func(key, query string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/x"+query, nil)
		req.Header.Set("X-Key", key)
		e.ServeHTTP(rec, req)
		return rec
	}

	// Two held requests fill the key's in-flight cap: a third is refused
	// without reaching the handler, and does not use the key's rate.
	var wg sync.WaitGroup
	held := make([]int, 2)
	for i := range held {
		wg.Go(func() { held[i] = get("mallory", "?hold=1").Code })
	}
	for reached.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	if rec := get("mallory", ""); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
		rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("beyond the in-flight cap: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	close(release)
	wg.Wait()
	if held[0] != http.StatusNoContent || held[1] != http.StatusNoContent {
		t.Fatalf("held requests answered %v", held)
	}
	// The slots are back; the burst of 3 has one left.
	if rec := get("mallory", ""); rec.Code != http.StatusNoContent {
		t.Fatalf("after the held requests ended: %d", rec.Code)
	}
	if rec := get("mallory", ""); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("beyond the burst: %d", rec.Code)
	}
	if rec := get("alice", ""); rec.Code != http.StatusNoContent {
		t.Fatalf("another key: %d", rec.Code)
	}
	if rec := get("", ""); rec.Code != http.StatusNoContent {
		t.Fatalf("no key passes uncharged: %d", rec.Code)
	}
	if n := reached.Load(); n != 5 {
		t.Fatalf("the handler ran %d times, want 5", n)
	}
	want := `
# HELP waitingroom_http_throttled_total Requests refused 429 by an in-process limit (no Redis or database call), by limit.
# TYPE waitingroom_http_throttled_total counter
waitingroom_http_throttled_total{limit="test"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "waitingroom_http_throttled_total"); err != nil {
		t.Fatal(err)
	}
}
