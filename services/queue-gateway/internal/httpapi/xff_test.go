package httpapi_test

import (
	"fmt"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// Without TRUSTED_PROXIES a client cannot pick its own address: ten enters
// naming ten different X-Forwarded-For addresses all come from the one peer
// and share its budget.
func TestForwardedForFromAnUntrustedPeerIsIgnored(t *testing.T) {
	t.Parallel()
	const perSec = 3
	h := newHarness(t, func(o *httpapi.Options, h *harness) {
		lim, err := redisstore.NewRateLimiter(testenv.Redis(h.t), "test:"+testenv.ID(h.t)+":", perSec)
		if err != nil {
			h.t.Fatal(err)
		}
		h.limits.Enter = lim
		o.TrustedProxies = nil
	})
	q := h.newQueue(nil)
	var forged []string
	for i := range 10 {
		forged = append(forged, fmt.Sprintf("198.51.100.%d", i+1))
	}
	ok, limited, elapsed := enterFromEach(t, h, q, "forged", forged)
	if max := burstBound(perSec, elapsed); ok < perSec || ok > max || ok+limited != len(forged) {
		t.Fatalf("ten forged X-Forwarded-For: %d × 200, %d × 429 in %v; want %d..%d × 200 (one peer, one budget)", ok, limited, elapsed, perSec, max)
	}
	if z := h.zcard(q); z != int64(ok) {
		t.Fatalf("ZCARD = %d, want %d", z, ok)
	}
}
