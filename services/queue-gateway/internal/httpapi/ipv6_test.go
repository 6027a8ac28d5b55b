package httpapi_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// behindProxy is a gateway with an enter limit of perSec, reached through a
// trusted proxy on loopback that forwards the client's address in
// X-Forwarded-For.
func behindProxy(perSec int, opts ...harnessOption) harnessOption {
	return func(o *httpapi.Options, h *harness) {
		lim, err := redisstore.NewRateLimiter(testenv.Redis(h.t), "test:"+testenv.ID(h.t)+":", perSec)
		if err != nil {
			h.t.Fatal(err)
		}
		h.limits.Enter = lim
		o.TrustedProxies = []string{"127.0.0.1/32"}
		for _, opt := range opts {
			opt(o, h)
		}
	}
}

// enterFromEach enters q once from each address, all at once, as a distinct
// user each, and counts the 200s and 429s.
func enterFromEach(t *testing.T, h *harness, q, tag string, addrs []string) (ok, limited int, elapsed time.Duration) {
	t.Helper()
	statuses := make([]int, len(addrs))
	errs := make([]error, len(addrs))
	toks := make([]string, len(addrs))
	for i := range addrs {
		toks[i] = h.token(fmt.Sprintf("%s-%d", tag, i), "")
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			r, err := h.do(http.MethodPost, "/api/v1/queues/"+q+"/enter", toks[i], nil, "X-Forwarded-For", a)
			statuses[i], errs[i] = r.status, err
			if err == nil && r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") == "" {
				errs[i] = fmt.Errorf("429 without Retry-After")
			}
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	for i, s := range statuses {
		switch {
		case errs[i] != nil:
			t.Errorf("enter from %s: %v", addrs[i], errs[i])
		case s == http.StatusOK:
			ok++
		case s == http.StatusTooManyRequests:
			limited++
		default:
			t.Errorf("enter from %s: status %d", addrs[i], s)
		}
	}
	return ok, limited, elapsed
}

// burstBound is the most a GCRA limit of perSec lets through in a burst that
// took elapsed: the burst itself plus what refilled meanwhile.
func burstBound(perSec int, elapsed time.Duration) int {
	return perSec + int(elapsed.Seconds()*float64(perSec))
}

func TestEnterLimitCountsAnIPv6ClientByItsSlash64(t *testing.T) {
	t.Parallel()
	const perSec = 3
	h := newHarness(t, behindProxy(perSec))
	q := h.newQueue(nil)

	// Ten addresses of one /64, in the spellings a client may choose.
	one64 := []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::ffff:1", "2001:db8:1:2:aaaa::9",
		"2001:db8:1:2:ffff:ffff:ffff:fffe", "2001:DB8:1:2::1", "2001:0db8:0001:0002:0000:0000:0000:0003",
		"2001:db8:1:2:1:2:3:4", "2001:db8:1:2:8000::", "2001:db8:1:2::abcd"}
	ok, limited, elapsed := enterFromEach(t, h, q, "one64", one64)
	if max := burstBound(perSec, elapsed); ok < perSec || ok > max || ok+limited != len(one64) {
		t.Fatalf("one /64: %d × 200, %d × 429 in %v; want %d..%d × 200 and the rest 429", ok, limited, elapsed, perSec, max)
	}
	t.Logf("one /64: %d × 200, %d × 429 in %v", ok, limited, elapsed)

	// Ten /64s: ten clients, each with its own budget.
	var many []string
	for i := range 10 {
		many = append(many, fmt.Sprintf("2001:db8:2:%x::1", i))
	}
	ok2, limited2, _ := enterFromEach(t, h, q, "many64", many)
	if ok2 != 10 || limited2 != 0 {
		t.Fatalf("ten /64s: %d × 200, %d × 429; want 10 × 200", ok2, limited2)
	}
	if z := h.zcard(q); z != int64(ok+ok2) {
		t.Fatalf("ZCARD = %d, want %d (only the allowed got a place)", z, ok+ok2)
	}
}

func TestEnterLimitCountsAnIPv4MappedAddressAsTheIPv4Address(t *testing.T) {
	t.Parallel()
	const perSec = 3
	h := newHarness(t, behindProxy(perSec))
	q := h.newQueue(nil)
	addrs := []string{"198.51.100.7", "::ffff:198.51.100.7", "::ffff:c633:6407", "198.51.100.7",
		"::FFFF:198.51.100.7", "0:0:0:0:0:ffff:198.51.100.7", "::ffff:198.51.100.7", "198.51.100.7"}
	ok, limited, elapsed := enterFromEach(t, h, q, "mapped", addrs)
	if max := burstBound(perSec, elapsed); ok < perSec || ok > max || ok+limited != len(addrs) {
		t.Fatalf("one IPv4 address in %d spellings: %d × 200, %d × 429 in %v; want %d..%d × 200", len(addrs), ok, limited, elapsed, perSec, max)
	}
	t.Logf("one IPv4 address: %d × 200, %d × 429 in %v", ok, limited, elapsed)
}
