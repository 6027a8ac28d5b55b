package dispatch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// tally is a dispatch.Metrics that keeps what it is told, for tests to
// read: counts by queue, the last held state and backlog, every tick.
type tally struct {
	mu                                    sync.Mutex
	leading, steppedDown, stoppedRelaying map[string]int
	forgotten, issued, expired, published map[string]int // published: by event type
	drawn                                 map[string]int // people placed by draws, by queue
	decided                               map[string]int // "queue decision" -> count
	held                                  map[string]map[string]bool
	backlog                               map[string]int64
	ticks                                 []time.Duration
	lineIssued                            map[string]int // "queue line" -> tokens
	lineTicks                             map[string]int // "queue line" -> ticks with a reply
	intervals                             map[string][]time.Duration
}

func newTally() *tally {
	return &tally{
		leading: map[string]int{}, steppedDown: map[string]int{}, stoppedRelaying: map[string]int{},
		forgotten: map[string]int{}, issued: map[string]int{}, expired: map[string]int{}, published: map[string]int{},
		held: map[string]map[string]bool{}, backlog: map[string]int64{}, drawn: map[string]int{}, decided: map[string]int{},
		lineIssued: map[string]int{}, lineTicks: map[string]int{}, intervals: map[string][]time.Duration{},
	}
}

func (m *tally) Punctual(q string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.intervals[q] = append(m.intervals[q], d)
}

// intervalsOf copies q's admission intervals.
func (m *tally) intervalsOf(q string) []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.intervals[q])
}

func (m *tally) Leading(q string) { m.inc(m.leading, q, 1) }
func (m *tally) LineTicked(q string, line int, issued int, _ int64) {
	m.inc(m.lineIssued, fmt.Sprintf("%s %d", q, line), issued)
	m.inc(m.lineTicks, fmt.Sprintf("%s %d", q, line), 1)
}
func (m *tally) StoppedRelaying(q string)  { m.inc(m.stoppedRelaying, q, 1); m.setBacklog(q, -1) }
func (m *tally) Forget(q string)           { m.inc(m.forgotten, q, 1) }
func (m *tally) Held(q, reason string)     { m.setHeld(q, reason, true) }
func (m *tally) Resumed(q, reason string)  { m.setHeld(q, reason, false) }
func (m *tally) Backlog(q string, n int64) { m.setBacklog(q, n) }
func (m *tally) Rate(string, float64)      {}
func (m *tally) RateDecided(q, decision string) {
	m.inc(m.decided, q+" "+decision, 1)
}
func (m *tally) Drew(q string, placed int64, _ time.Duration) {
	m.inc(m.drawn, q, int(placed))
}

func (m *tally) SteppedDown(q string) {
	m.inc(m.steppedDown, q, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.held, q)
}

func (m *tally) Ticked(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ticks = append(m.ticks, d)
}

func (m *tally) Admitted(q string, issued, expired int) {
	m.inc(m.issued, q, issued)
	m.inc(m.expired, q, expired)
}

func (m *tally) Published(events []queue.Event) {
	for _, e := range events {
		m.inc(m.published, e.Type, 1)
	}
}

// get reads one count under the lock.
func (m *tally) get(c map[string]int, k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return c[k]
}

func (m *tally) inc(c map[string]int, k string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c[k] += n
}

// setBacklog keeps n, or forgets q's backlog when n < 0.
func (m *tally) setBacklog(q string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < 0 {
		delete(m.backlog, q)
		return
	}
	m.backlog[q] = n
}

func (m *tally) setHeld(q, reason string, held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[q] == nil {
		m.held[q] = map[string]bool{}
	}
	m.held[q][reason] = held
}

// count reads c[k].
func (m *tally) count(c map[string]int, k string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return c[k]
}

// issuedSum is the tokens issued in every queue.
func (m *tally) issuedSum() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	sum := 0
	for _, n := range m.issued {
		sum += n
	}
	return sum
}

// heldFor reports whether q is held for reason, and whether any state for
// q is kept at all.
func (m *tally) heldFor(q, reason string) (held, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held, known = m.held[q][reason]
	return held, known
}

func (m *tally) backlogOf(q string) (n int64, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, known = m.backlog[q]
	return n, known
}

// tickStats is the recorded ticks' p99 (nearest rank), mean and count.
func (m *tally) tickStats() (p99, mean time.Duration, count int) {
	m.mu.Lock()
	d := slices.Clone(m.ticks)
	m.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	rank := int(math.Ceil(0.99*float64(len(d)))) - 1
	return d[rank], sum / time.Duration(len(d)), len(d)
}

// The Dispatcher tells its Metrics what it does: leading a queue, every
// token issued, every event published, a hold on admission while the
// broker is away and its end, the outbox backlog, and stepping down.
func TestDispatcherRecordsWhatItDoesInItsMetrics(t *testing.T) {
	t.Parallel()
	const bound, people = 5, 20
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: time.Second, OutboxBound: bound})
	q := c.newQueue(func(cfg *queue.Config) { cfg.AdmissionRatePerSec = 100 })
	c.fill(q, people)
	m := newTally()
	o := c.opts
	o.Owner = testenv.ID(t)
	d, err := dispatch.New(c.store, c.pub, slog.New(slog.NewTextHandler(io.Discard, nil)), m, o)
	if err != nil {
		t.Fatal(err)
	}

	// The broker is down from the start: the outbox fills to the bound.
	c.pub.fail.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { _ = stop() })

	testenv.WaitFor(t, 10*time.Second, "admission held (OUTBOX_BACKLOG) and a backlog of 5 recorded", func() bool {
		held, _ := m.heldFor(q, queue.HeldOutboxBacklog)
		n, _ := m.backlogOf(q)
		return held && n == bound
	})
	if got := m.count(m.issued, q); got != bound {
		t.Errorf("held at the bound: %d issued recorded, want %d", got, bound)
	}
	if got := m.count(m.published, queue.EventTokenIssued); got != 0 {
		t.Errorf("broker down: %d TokenIssued recorded as published, want 0", got)
	}

	c.pub.fail.Store(false)
	testenv.WaitFor(t, 15*time.Second, "every TokenIssued published and recorded, the backlog 0", func() bool {
		n, _ := m.backlogOf(q)
		return m.count(m.published, queue.EventTokenIssued) == people && n == 0
	})
	if held, known := m.heldFor(q, queue.HeldOutboxBacklog); held || !known {
		t.Errorf("after the broker returned: held %v (recorded: %v), want resumed", held, known)
	}
	if got, sent := m.count(m.issued, q), len(c.pub.of(queue.EventTokenIssued)); got != people || sent != people {
		t.Errorf("%d issued recorded, %d TokenIssued published; want %d each", got, sent, people)
	}
	if _, _, n := m.tickStats(); n == 0 {
		t.Error("no tick recorded")
	}

	if err := stop(); err != nil {
		t.Fatalf("dispatcher: %v", err)
	}
	_, heldKnown := m.heldFor(q, queue.HeldOutboxBacklog)
	_, backlogKnown := m.backlogOf(q)
	got := []int{m.count(m.leading, q), m.count(m.steppedDown, q), m.count(m.stoppedRelaying, q), m.count(m.forgotten, q)}
	if !slices.Equal(got, []int{1, 1, 1, 0}) || heldKnown || backlogKnown {
		t.Errorf("after shutdown: leading, stepped down, stopped relaying, forgotten = %v, want [1 1 1 0]; held kept %v, backlog kept %v (want neither)",
			got, heldKnown, backlogKnown)
	}
}
