package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/wire"
)

// capped is a stream server behind a trusted proxy on loopback, which
// forwards the client's address in X-Forwarded-For.
type capped struct {
	*server
	reg *prometheus.Registry
}

func newCappedServer(t *testing.T, h *hub.Hub, reg *prometheus.Registry, m stream.Metrics) *capped {
	t.Helper()
	ver, err := auth.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pos := &positions{admitted: map[string]*queue.Token{}}
	svc := stream.New(h, pos, log, m, stream.Options{Heartbeat: time.Second, PositionEvery: time.Hour, WriteTimeout: 2 * time.Second})
	api, err := httpapi.New(httpapi.Options{Service: svc, Verifier: ver, Log: log, Registry: reg,
		Health: httpserver.NewHealth(nil), TrustedProxies: []string{"127.0.0.1/32"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { h.CloseAll(); srv.Close(); _ = api.Close() })
	return &capped{server: &server{url: srv.URL, svc: svc, hub: h, ver: ver, pos: pos}, reg: reg}
}

// open opens a stream for user from addr and returns its status; a 200
// stream stays open until ctx ends.
func (s *capped) open(t *testing.T, ctx context.Context, q, user, addr string) (int, http.Header, error) {
	_, res, err := connect(ctx, s.url+"/api/v1/queues/"+q+"/events?access_token="+s.token(t, user), "X-Forwarded-For", addr)
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, res.Header, nil
}

// openEach opens one stream per address, all at once, each for its own
// user, and counts the 200s and the 429s (each with Retry-After).
func (s *capped) openEach(t *testing.T, ctx context.Context, tag string, addrs []string) (ok, limited int) {
	t.Helper()
	statuses := make([]int, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			status, hdr, err := s.open(t, ctx, "q1", fmt.Sprintf("%s-%d", tag, i), a)
			statuses[i], errs[i] = status, err
			if err == nil && status == http.StatusTooManyRequests && hdr.Get("Retry-After") == "" {
				errs[i] = fmt.Errorf("429 without Retry-After")
			}
		})
	}
	wg.Wait()
	for i, st := range statuses {
		switch {
		case errs[i] != nil:
			t.Errorf("stream from %s: %v", addrs[i], errs[i])
		case st == http.StatusOK:
			ok++
		case st == http.StatusTooManyRequests:
			limited++
		default:
			t.Errorf("stream from %s: status %d", addrs[i], st)
		}
	}
	return ok, limited
}

// rejected reads waitingroom_sse_streams_rejected_total{reason}.
func (s *capped) rejected(t *testing.T, reason string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "waitingroom_sse_streams_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestPerIPStreamCapCountsAnIPv6ClientByItsSlash64(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := hub.New(8, 3)
	m := wire.NewMetrics(reg, h)
	s := newCappedServer(t, h, reg, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	one64 := []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::ffff:1", "2001:db8:1:2:aaaa::9",
		"2001:db8:1:2:ffff:ffff:ffff:fffe", "2001:DB8:1:2::1", "2001:0db8:0001:0002:0000:0000:0000:0003",
		"2001:db8:1:2:1:2:3:4", "2001:db8:1:2:8000::", "2001:db8:1:2::abcd"}
	if ok, limited := s.openEach(t, ctx, "one64", one64); ok != 3 || limited != 7 {
		t.Fatalf("ten addresses of one /64: %d open, %d × 429; want 3 and 7", ok, limited)
	}
	var many []string
	for i := range 10 {
		many = append(many, fmt.Sprintf("2001:db8:2:%x::1", i))
	}
	if ok, limited := s.openEach(t, ctx, "many64", many); ok != 10 || limited != 0 {
		t.Fatalf("ten /64s: %d open, %d × 429; want 10 open", ok, limited)
	}
	if n := h.Len(); n != 13 {
		t.Fatalf("hub holds %d streams, want 13", n)
	}
	if r := s.rejected(t, "ip_cap"); r != 7 {
		t.Fatalf("rejected{reason=ip_cap} = %v, want 7", r)
	}
}

func TestPerIPStreamCapAtTheConfiguredIPv6Prefix(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := hub.New(8, 2, hub.IPv6Prefix(48))
	m := wire.NewMetrics(reg, h)
	s := newCappedServer(t, h, reg, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Five /64s of one /48 are one client at /48; an IPv4 address and
	// its IPv4-mapped spelling are one client too.
	if ok, limited := s.openEach(t, ctx, "one48", []string{"2001:db8:7:1::1", "2001:db8:7:2::1", "2001:db8:7:3::1", "2001:db8:7:4::1", "2001:db8:7:ffff::1"}); ok != 2 || limited != 3 {
		t.Fatalf("five /64s of one /48: %d open, %d × 429; want 2 and 3", ok, limited)
	}
	if ok, limited := s.openEach(t, ctx, "v4", []string{"198.51.100.7", "::ffff:198.51.100.7", "::ffff:c633:6407"}); ok != 2 || limited != 1 {
		t.Fatalf("one IPv4 address in three spellings: %d open, %d × 429; want 2 and 1", ok, limited)
	}
}

func TestPerUserStreamCap(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := hub.New(8, 20, hub.MaxPerUser(3))
	m := wire.NewMetrics(reg, h)
	s := newCappedServer(t, h, reg, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Three tabs, over two queues and from three addresses: all open.
	tabs := make([]context.CancelFunc, 3)
	for i, q := range []string{"q1", "q2", "q1"} {
		tctx, tcancel := context.WithCancel(ctx)
		tabs[i] = tcancel
		if status, _, err := s.open(t, tctx, q, "dana", fmt.Sprintf("203.0.113.%d", i+1)); err != nil || status != http.StatusOK {
			t.Fatalf("tab %d: %d %v, want 200", i, status, err)
		}
	}
	// The fourth, from a fresh address on a fresh queue, is one too many.
	_, res, err := connect(ctx, s.url+"/api/v1/queues/q3/events?access_token="+s.token(t, "dana"), "X-Forwarded-For", "2001:db8:9::1")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("4th stream of one user: %d Retry-After %q Content-Type %q, want 429 problem+json with Retry-After",
			res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Content-Type"))
	}
	// Another user from dana's address is not held by her cap.
	if status, _, err := s.open(t, ctx, "q1", "erin", "203.0.113.1"); err != nil || status != http.StatusOK {
		t.Fatalf("another user: %d %v, want 200", status, err)
	}

	// Dana closes a tab: once the server has let it go, a new one opens,
	// and the one after is refused again.
	tabs[0]()
	deadline := time.Now().Add(10 * time.Second)
	for h.Len() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("hub holds %d streams 10 s after a tab closed, want 3", h.Len())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, _, err := s.open(t, ctx, "q3", "dana", "203.0.113.9"); err != nil || status != http.StatusOK {
		t.Fatalf("tab after one closed: %d %v, want 200", status, err)
	}
	if status, _, err := s.open(t, ctx, "q3", "dana", "203.0.113.10"); err != nil || status != http.StatusTooManyRequests {
		t.Fatalf("5th stream, 3 open: %d %v, want 429", status, err)
	}
	if n := len(h.Streams("q1", "dana")) + len(h.Streams("q2", "dana")) + len(h.Streams("q3", "dana")); n != 3 || h.Len() != 4 {
		t.Fatalf("dana holds %d streams, the hub %d; want 3 and 4", n, h.Len())
	}
	if r, ip := s.rejected(t, "user_cap"), s.rejected(t, "ip_cap"); r != 2 || ip != 0 {
		t.Fatalf("rejected user_cap %v ip_cap %v, want 2 and 0", r, ip)
	}
}
