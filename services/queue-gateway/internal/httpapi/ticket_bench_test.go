package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// BenchmarkPositionWithTicket is the gateway's handler chain for a poll
// with a ticket far from the front (auth, ticket check, the frontier's
// estimate, the view), without the network: what a poll costs the
// gateway's CPU on top of net/http, and its allocations.
func BenchmarkPositionWithTicket(b *testing.B) {
	// The verifier as the service builds it: tokens cached once verified
	// (AUTH_CACHE_SIZE), as every poll after a person's first is.
	ver, err := auth.NewVerifier(testSecret, auth.WithCache(1024))
	if err != nil {
		b.Fatal(err)
	}
	h := newHarness(b, func(o *httpapi.Options, h *harness) { o.Verifier, h.ver = ver, ver })
	q := h.newQueue(map[string]any{"admissionRatePerSec": 10})
	tickets := h.fillLine(q, 300)
	h.pollWith(q, userID(250), tickets[250])
	for h.frontiers.Lookup(q) == nil {
		time.Sleep(10 * time.Millisecond)
	}
	jwt := h.token(userID(250), "")
	front := h.reads("frontier")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/queues/"+q+"/position", nil)
			req.Header.Set("Authorization", "Bearer "+jwt)
			req.Header.Set("X-Queue-Ticket", tickets[250])
			w := httptest.NewRecorder()
			h.h.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Errorf("poll: %d %s", w.Code, w.Body)
				return
			}
		}
	})
	b.StopTimer()
	if got := h.reads("frontier") - front; got < b.N {
		b.Fatalf("%d of %d polls answered from the frontier", got, b.N)
	}
}
