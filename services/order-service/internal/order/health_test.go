package order

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// clock is a settable time for Health's bookkeeping.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func testHealth(c *clock) *Health {
	h := NewHealth("replica-1")
	h.now = c.now
	h.rnd = rand.New(rand.NewPCG(1, 2))
	return h
}

// One interval's figures are exact: counts, the nearest-rank P95 of the
// durations, the latest backlog; the next interval starts from zero, an
// idle queue reports 0 orders until a minute without attempts, then it is
// forgotten.
func TestHealthReport(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	h := testHealth(c)
	h.Backlog(3)
	h.Backlog(7)

	// 100 orders on sale taking 1..100 ms, recorded out of order: 95
	// created, 2 sold out, 3 out of time.
	for i, ms := range rand.New(rand.NewPCG(3, 4)).Perm(100) {
		var err error
		switch {
		case i < 2:
			err = ErrSoldOut
		case i < 5:
			err = fmt.Errorf("place order: %w", context.DeadlineExceeded)
		}
		h.finished("sale", time.Duration(ms+1)*time.Millisecond, err)
	}
	// Refused before the consume: Redis or the key's database down count,
	// a token that turned out invalid does not.
	h.refused("sale", fmt.Errorf("consume: %w", queue.ErrUnavailable))
	h.refused("sale", fmt.Errorf("begin idempotent: %w", ErrUnavailable))
	h.refused("sale", queue.ErrInvalidToken)
	// Another queue: one order of 4 ms, one refused as invalid.
	h.finished("drop", 4*time.Millisecond, nil)
	h.refused("other", queue.ErrInvalidToken)

	at := c.t.Add(time.Second)
	got := h.Report(at, time.Second)
	want := []queue.OrderHealth{
		{QueueID: "drop", Source: "replica-1", At: at, Interval: time.Second, Orders: 1, Created: 1, P95: 4 * time.Millisecond, OutboxBacklog: 7},
		{QueueID: "other", Source: "replica-1", At: at, Interval: time.Second, OutboxBacklog: 7},
		{QueueID: "sale", Source: "replica-1", At: at, Interval: time.Second, Orders: 100, Created: 95, P95: 95 * time.Millisecond, Unavailable: 5, OutboxBacklog: 7},
	}
	assertReports(t, "first interval", got, want)

	// The next second nobody orders: every queue still reports, at zero.
	at = at.Add(time.Second)
	got = h.Report(at, time.Second)
	for i := range want {
		want[i] = queue.OrderHealth{QueueID: want[i].QueueID, Source: "replica-1", At: at, Interval: time.Second, OutboxBacklog: 7}
	}
	assertReports(t, "idle interval", got, want)

	// A minute after their last attempt (c.t) the queues are dropped; sale
	// orders once more just before, and stays.
	c.t = c.t.Add(59 * time.Second)
	h.finished("sale", 10*time.Millisecond, nil)
	at = c.t.Add(time.Second)
	got = h.Report(at, time.Second)
	assertReports(t, "a minute later", got, []queue.OrderHealth{
		{QueueID: "sale", Source: "replica-1", At: at, Interval: time.Second, Orders: 1, Created: 1, P95: 10 * time.Millisecond, OutboxBacklog: 7},
	})
	if n := len(h.queues); n != 1 {
		t.Fatalf("%d queues remembered, want 1 (sale)", n)
	}
	at = c.t.Add(59*time.Second + 999*time.Millisecond)
	if got := h.Report(at, time.Second); len(got) != 1 || got[0].Orders != 0 {
		t.Fatalf("59.999 s after sale's last order: %+v, want one report of 0 orders", got)
	}
	if got := h.Report(c.t.Add(time.Minute), time.Second); len(got) != 0 || len(h.queues) != 0 {
		t.Fatalf("a minute after sale's last order: %+v and %d queues remembered, want none", got, len(h.queues))
	}
}

func assertReports(t *testing.T, when string, got, want []queue.OrderHealth) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d reports %+v, want %d %+v", when, len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%s: report %d\n got %+v\nwant %+v", when, i, got[i], want[i])
		}
	}
}

// Past 4096 orders in an interval, the durations kept stay 4096 and the
// P95 is estimated from them, close to the true one.
func TestHealthSampleCap(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	h := testHealth(c)
	const n = 20000
	for _, v := range rand.New(rand.NewPCG(5, 6)).Perm(n) {
		h.finished("sale", time.Duration(v+1)*time.Millisecond, nil)
	}
	if kept := len(h.queues["sale"].samples); kept != healthSamples {
		t.Fatalf("%d durations kept, want %d", kept, healthSamples)
	}
	got := h.Report(c.t.Add(time.Second), time.Second)
	if len(got) != 1 || got[0].Orders != n || got[0].Created != n {
		t.Fatalf("reports %+v, want one of %d orders", got, n)
	}
	// The true P95 is 19,000 ms; a sample of 4096 is off by ~0.34 %
	// (68 ms) at one standard error: allow five.
	if p := got[0].P95; p < 18660*time.Millisecond || p > 19340*time.Millisecond {
		t.Fatalf("P95 %v, want 19 s within 340 ms", p)
	}
	t.Logf("P95 of %d orders from %d kept: %v (exact 19s)", n, healthSamples, got[0].P95)
}

func TestP95(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", ms(7), 7 * time.Millisecond},
		{"twenty: the 19th", ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 19 * time.Millisecond},
		{"twenty-one: the 20th", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21), 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p95(tc.ds); got != tc.want {
				t.Errorf("p95 = %v, want %v", got, tc.want)
			}
		})
	}
}

// A nil Health (reports off) records nothing and passes the backlog on.
func TestHealthNil(t *testing.T) {
	var h *Health
	h.finished("sale", time.Millisecond, nil)
	h.refused("sale", ErrUnavailable)
	h.Backlog(5)
	if got := h.Report(time.Now(), time.Second); got != nil {
		t.Fatalf("nil Health reported %+v", got)
	}
	m := &backlogMetrics{}
	h.WithBacklog(m).Backlog(9)
	if m.n != 9 {
		t.Fatalf("metrics told %d, want 9", m.n)
	}
	h = NewHealth("r")
	h.WithBacklog(m).Backlog(11)
	if m.n != 11 || h.backlog.Load() != 11 {
		t.Fatalf("metrics told %d, health %d; want 11 both", m.n, h.backlog.Load())
	}
}

type backlogMetrics struct {
	nopMetrics
	n int64
}

func (m *backlogMetrics) Backlog(n int64) { m.n = n }

// healthSink publishes into memory, or fails every call with err.
type healthSink struct {
	mu      sync.Mutex
	calls   int
	reports []queue.OrderHealth
	err     error
}

func (s *healthSink) PublishHealth(_ context.Context, rs []queue.OrderHealth) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return s.err
	}
	s.reports = append(s.reports, rs...)
	return nil
}

// reportMetrics counts the reports published and dropped.
type reportMetrics struct {
	nopMetrics
	mu                 sync.Mutex
	published, dropped int
}

func (m *reportMetrics) HealthReports(n int, published bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if published {
		m.published += n
	} else {
		m.dropped += n
	}
}

// countingHandler counts the warnings logged.
type countingHandler struct {
	slog.Handler
	mu    sync.Mutex
	warns int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Level == slog.LevelWarn {
		h.warns++
	}
	return nil
}

// The loop publishes a report per queue every interval, whose Interval is
// the time since the last; failed publishes are dropped (never sent again)
// and logged at most once per healthLogEvery.
func TestHealthLoop(t *testing.T) {
	const every = 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		err  error
	}{{"publishes", nil}, {"broker down", errors.New("broker: connection closed")}} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHealth("replica-1")
			h.finished("sale", 5*time.Millisecond, nil)
			sink := &healthSink{err: tc.err}
			logs := &countingHandler{}
			ctx, cancel := context.WithTimeout(context.Background(), 25*every)
			defer cancel()
			m := &reportMetrics{}
			h.Loop(ctx, every, sink, slog.New(logs), m)

			sink.mu.Lock()
			defer sink.mu.Unlock()
			if sink.calls < 10 {
				t.Fatalf("%d publishes in %v, want one per %v (at least 10)", sink.calls, 25*every, every)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if tc.err != nil {
				if logs.warns != 1 || len(sink.reports) != 0 || m.dropped != sink.calls || m.published != 0 {
					t.Fatalf("%d warnings, %d dropped, %d published for %d failed publishes; want 1, %d, 0", logs.warns, m.dropped, m.published, sink.calls, sink.calls)
				}
				return
			}
			if logs.warns != 0 || len(sink.reports) != sink.calls || m.published != sink.calls || m.dropped != 0 {
				t.Fatalf("%d reports in %d publishes (%d warnings, %d counted published, %d dropped), want one each, none dropped",
					len(sink.reports), sink.calls, logs.warns, m.published, m.dropped)
			}
			first, orders := sink.reports[0], int64(0)
			for _, r := range sink.reports {
				orders += r.Orders
				// A ticker read late is followed by one on time: an
				// interval is anywhere above 0 on a busy machine.
				if r.QueueID != "sale" || r.Interval <= 0 || r.Interval > 10*every {
					t.Fatalf("report %+v, want sale over (0, %v]", r, 10*every)
				}
			}
			if first.Orders != 1 || first.P95 != 5*time.Millisecond || orders != 1 {
				t.Fatalf("first report %+v, %d orders in all; want the one order of 5 ms, once", first, orders)
			}
		})
	}
}

// An attempt still on the order path at the end of an interval counts in
// the p95 with its age so far: a path that holds every order shows at once,
// with no order finished. Once answered, it no longer counts.
func TestHealthCountsTheAgeOfAttemptsInFlight(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	h := testHealth(c)
	end := h.begin("sale")
	h.begin("sale") // never answered within the test
	c.t = c.t.Add(2 * time.Second)
	h.finished("sale", 10*time.Millisecond, nil)
	c.t = c.t.Add(time.Second)
	r := h.Report(c.t, time.Second)
	if len(r) != 1 || r[0].Orders != 1 || r[0].P95 != 3*time.Second {
		t.Fatalf("report with two attempts 3 s in flight and one 10 ms order: %+v, want 1 order, p95 3s", r)
	}
	end()
	c.t = c.t.Add(time.Second)
	r = h.Report(c.t, time.Second)
	if len(r) != 1 || r[0].Orders != 0 || r[0].P95 != 4*time.Second {
		t.Fatalf("next report, one attempt 4 s in flight: %+v, want p95 4s and no order", r)
	}
}
