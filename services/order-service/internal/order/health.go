package order

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// HealthPublisher sends one interval's health reports, one per queue. wire
// implements it with the broker's publisher directly, not through the
// outbox: a report is worthless once the next one is due, so it is never
// stored nor retried.
type HealthPublisher interface {
	PublishHealth(ctx context.Context, reports []queue.OrderHealth) error
}

const (
	// healthSamples bounds the durations kept per queue per interval; past
	// it the P95 is taken from a uniform sample of that many.
	healthSamples = 4096
	// healthForget: a queue with no attempt for this long is reported on no
	// more, and forgotten.
	healthForget = time.Minute
	// healthLogEvery is the least time between two warnings about reports
	// that could not be published.
	healthLogEvery = 5 * time.Second
)

// Health records this replica's order attempts by queue and sums them up
// once per interval as a queue.OrderHealth each, for the dispatcher's
// adaptive admission. An attempt counts once it passed Screen (its entry
// token was usable): junk says nothing about the order path. It is safe for
// concurrent use and its recording never waits on I/O. A nil *Health
// records nothing.
type Health struct {
	source  string
	now     func() time.Time
	backlog atomic.Int64

	mu     sync.Mutex
	rnd    *rand.Rand
	queues map[string]*window
	nextID uint64
}

// window is one queue's attempts in the running interval.
type window struct {
	orders, created, unavailable int64
	// samples are the durations of the interval's orders: all of them, or
	// a uniform sample of healthSamples (reservoir sampling).
	samples []time.Duration
	// last is when the queue last had an attempt.
	last time.Time
	// inflight are the attempts on the order path now, by when they began:
	// at the end of an interval their ages join the samples (lower bounds
	// of their durations), so an order path that holds its orders shows in
	// the p95 before any of them ends.
	inflight map[uint64]time.Time
}

// NewHealth returns a recorder whose reports name source as the replica.
func NewHealth(source string) *Health {
	return &Health{
		source: source,
		now:    time.Now,
		rnd:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		queues: make(map[string]*window),
	}
}

// finished records an attempt whose token was consumed, answered d after
// the consume began: err nil is an order created.
func (h *Health) finished(q string, d time.Duration, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.window(q)
	w.orders++
	if err == nil {
		w.created++
	}
	if unavailable(err) {
		w.unavailable++
	}
	if len(w.samples) < healthSamples {
		w.samples = append(w.samples, d)
	} else if i := h.rnd.Int64N(w.orders); i < healthSamples {
		w.samples[i] = d
	}
}

// begin records that an attempt of q entered the order path now; the
// returned func ends it (call it once the attempt is answered, whatever
// the outcome, after finished or refused).
func (h *Health) begin(q string) func() {
	if h == nil {
		return func() {}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.window(q)
	if w.inflight == nil {
		w.inflight = map[uint64]time.Time{}
	}
	h.nextID++
	id := h.nextID
	w.inflight[id] = h.now()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(w.inflight, id)
	}
}

// refused records an attempt that passed Screen but failed before its token
// was consumed (the consume, or claiming its Idempotency-Key). Only an
// outage counts: the order path could not take it.
func (h *Health) refused(q string, err error) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.window(q)
	if unavailable(err) {
		w.unavailable++
	}
}

// window returns q's running window, marking q as just attempted. h.mu is
// held.
func (h *Health) window(q string) *window {
	w, ok := h.queues[q]
	if !ok {
		w = &window{}
		h.queues[q] = w
	}
	w.last = h.now()
	return w
}

// unavailable reports whether err is answered 503 because of the order
// path: an outage or an attempt out of time. This process's own overload
// (queue.ErrOverloaded: no Redis connection was free, nothing was sent) is
// not: it says nothing about the order path, and a flood that causes it
// must not cut every queue's admission.
func unavailable(err error) bool {
	return err != nil && !errors.Is(err, queue.ErrOverloaded) && requestOutcome(err) == outcomeUnavailable
}

// Backlog is told the outbox backlog whenever the relay measures it; the
// reports carry the latest figure.
func (h *Health) Backlog(n int64) {
	if h != nil {
		h.backlog.Store(n)
	}
}

// WithBacklog returns m, also telling h every backlog m is told: give it to
// RelayLoop, which measures the backlog.
func (h *Health) WithBacklog(m Metrics) Metrics {
	if h == nil {
		return m
	}
	return backlogTee{Metrics: orNop(m), h: h}
}

type backlogTee struct {
	Metrics
	h *Health
}

func (t backlogTee) Backlog(n int64) {
	t.Metrics.Backlog(n)
	t.h.Backlog(n)
}

// Report ends the interval of length interval at at: one report per queue
// with an attempt in the last minute, by queue id (a queue idle in this
// interval reports 0 orders), and the next interval starts empty. Queues
// idle for a minute are forgotten.
func (h *Health) Report(at time.Time, interval time.Duration) []queue.OrderHealth {
	if h == nil {
		return nil
	}
	type taken struct {
		r       queue.OrderHealth
		samples []time.Duration
	}
	backlog := h.backlog.Load()
	h.mu.Lock()
	all := make([]taken, 0, len(h.queues))
	for q, w := range h.queues {
		if w.orders == 0 && w.unavailable == 0 && len(w.inflight) == 0 && at.Sub(w.last) >= healthForget {
			delete(h.queues, q)
			continue
		}
		samples := w.samples
		for _, began := range w.inflight {
			if len(samples) >= 2*healthSamples {
				break
			}
			samples = append(samples, at.Sub(began))
		}
		all = append(all, taken{r: queue.OrderHealth{
			QueueID: q, Source: h.source, At: at, Interval: interval,
			Orders: w.orders, Created: w.created, Unavailable: w.unavailable, OutboxBacklog: backlog,
		}, samples: samples})
		w.orders, w.created, w.unavailable, w.samples = 0, 0, 0, nil
	}
	h.mu.Unlock()

	out := make([]queue.OrderHealth, len(all))
	for i, t := range all {
		t.r.P95 = p95(t.samples)
		out[i] = t.r
	}
	slices.SortFunc(out, func(a, b queue.OrderHealth) int { return cmp.Compare(a.QueueID, b.QueueID) })
	return out
}

// p95 is the nearest-rank 95th percentile of ds (sorted in place): the
// smallest duration at least 95 % of them do not exceed; 0 for none.
func p95(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := (95*len(ds) + 99) / 100 // ceil(0.95 n), 1-based
	return ds[rank-1]
}

// Loop reports every interval until ctx ends: each queue's report for the
// interval just ended goes to pub at once. A publish that fails (or takes
// longer than the interval) drops its reports: the next interval's are
// due. The failures are logged at most every few seconds; m (nil: none)
// counts the reports published and dropped.
func (h *Health) Loop(ctx context.Context, every time.Duration, pub HealthPublisher, log *slog.Logger, m Metrics) {
	m = orNop(m)
	t := time.NewTicker(every)
	defer t.Stop()
	prev := h.now()
	var dropped int
	var lastWarn time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		at := h.now()
		reports := h.Report(at, at.Sub(prev))
		prev = at
		if len(reports) == 0 {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := pub.PublishHealth(pctx, reports)
		cancel()
		if err == nil {
			m.HealthReports(len(reports), true)
			continue
		}
		m.HealthReports(len(reports), false)
		if ctx.Err() != nil {
			continue
		}
		dropped += len(reports)
		if at.Sub(lastWarn) >= healthLogEvery {
			log.Warn("order health reports dropped", "reports", dropped, "err", err)
			dropped, lastWarn = 0, at
		}
	}
}
