// Package dispatchtest is test support for package dispatch: an in-memory
// dispatch.Store and the contract every implementation of that port
// passes, in three groups (leases, ticks, outbox). The fake runs the
// contract in this package's own tests; redisstore runs it against real
// Redis in services/admission-dispatcher/internal/wire, so the fake cannot
// drift from it. Import it from _test.go files only.
package dispatchtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Store is dispatch.Store in memory, with the rules of redisstore's lease,
// issue, draw and outbox scripts (see RunStoreContract). Leases, tokens,
// slots, the ticks' credit and outbox idle times run on its clock, which
// follows the wall clock (a Dispatcher's tickers run on it too) and which
// Advance moves ahead, so a test skips a lease's time to live without
// sleeping; StopClock makes it stand still between Advances. Queues are
// made with Configure, people let in with Enter, as the gateway's PUT and
// enter do.
type Store struct {
	mu      sync.Mutex
	ahead   time.Duration    // what Advance added to the wall clock
	stopped time.Time        // the clock's time while stopped; zero: running
	queues  map[string]bool  // wr:queues
	lines   map[string]*line // by line id (queue.LineID): a queue is its line 0
}

// line is the keys of one line (a queue not split into lines is its own
// line 0): redisstore's wr:{<line id>}:*.
type line struct {
	cfg      *config // nil: none (never made, deleted, or a line not copied yet)
	seq      int64
	waiting  []place          // by sequence number
	prequeue map[string]int64 // user -> when they pre-queued (ms)
	entered  map[string]int64 // user -> when they got their place (µs), a split queue's
	draw     *draw
	slots    map[string]int64  // user -> when the slot expires (ms): active
	tokens   map[string]int64  // user -> when the token expires (ms)
	markers  map[string]marker // status:<user>
	d        dispatchHash
	lock     *lock
	outbox   *stream
}

type place struct {
	user string
	seq  int64
}

// config is a line's config hash: the queue's knobs and what redisstore
// keeps next to them.
type config struct {
	queue.Config
	version     int64
	index       int           // the line's own index ("line")
	key         queue.LineKey // line 0's only
	drawPending bool
}

// dispatchHash is the dispatch hash of a line: the fencing epoch and what
// the ticks keep.
type dispatchHash struct {
	epoch                int64
	credit               float64
	lastTickMs, punctual int64 // 0: none
	measured, effective  float64
	hasMeasured, hasEff  bool
	reason, held         string
	issuedTotal          int64
}

type marker struct {
	state, tid string
	until      int64 // ms
}

type lock struct {
	owner          string
	epoch, expires int64
}

// NewStore returns an empty Store whose clock runs with the wall clock.
func NewStore() *Store {
	return &Store{queues: map[string]bool{}, lines: map[string]*line{}}
}

// Now is the Store's clock.
func (s *Store) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock()
}

// Advance moves the Store's clock on by d.
func (s *Store) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped.IsZero() {
		s.ahead += d
	} else {
		s.stopped = s.stopped.Add(d)
	}
}

// StopClock makes the Store's clock stand still at its time now; only
// Advance moves it from then on. A test of the Store alone then counts
// exact milliseconds.
func (s *Store) StopClock() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = s.clock()
}

func (s *Store) clock() time.Time {
	if !s.stopped.IsZero() {
		return s.stopped
	}
	return time.Now().Add(s.ahead)
}

func (s *Store) nowMs() int64 { return s.clock().UnixMilli() }

// line returns line id's keys, made empty when it has none.
func (s *Store) line(id string) *line {
	l := s.lines[id]
	if l == nil {
		l = newLine()
		s.lines[id] = l
	}
	return l
}

func newLine() *line {
	return &line{prequeue: map[string]int64{}, entered: map[string]int64{}, slots: map[string]int64{},
		tokens: map[string]int64{}, markers: map[string]marker{}}
}

// Queues lists the registered queue ids, sorted.
func (s *Store) Queues(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.queues))
	for q := range s.queues {
		ids = append(ids, q)
	}
	slices.Sort(ids)
	return ids, nil
}

// Unregister takes q out of the registry if it has no config (closed and
// done with, or never made) and reports whether it removed it.
func (s *Store) Unregister(_ context.Context, q string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	listed := s.queues[q]
	if l := s.lines[q]; l != nil && l.cfg != nil {
		return false, nil
	}
	delete(s.queues, q)
	return listed, nil
}

// Config returns q's knobs and live figures; a queue split into lines has
// its figures summed over the lines copied so far.
func (s *Store) Config(_ context.Context, q string) (queue.Config, queue.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	main := s.lines[q]
	if main == nil || main.cfg == nil {
		return queue.Config{}, queue.Stats{}, fmt.Errorf("config %s: %w", q, queue.ErrNotFound)
	}
	st := s.stats(main)
	if main.cfg.Shards <= 1 {
		return main.cfg.Config, st, nil
	}
	st.Lines = []queue.LineStats{lineStats(0, st)}
	for i := 1; i < main.cfg.Shards; i++ {
		l := s.lines[queue.LineID(q, i)]
		if l == nil || l.cfg == nil {
			continue
		}
		ls := s.stats(l)
		st.Lines = append(st.Lines, lineStats(i, ls))
		st.Waiting += ls.Waiting
		st.Active += ls.Active
		st.IssuedTotal += ls.IssuedTotal
		st.MeasuredRate += ls.MeasuredRate
		if ls.Draw != nil && st.Draw != nil {
			st.Draw.PreQueued += ls.Draw.PreQueued
			st.Draw.Placed += ls.Draw.Placed
		}
	}
	return main.cfg.Config, st, nil
}

func lineStats(i int, st queue.Stats) queue.LineStats {
	return queue.LineStats{Line: i, Waiting: st.Waiting, Active: st.Active, IssuedTotal: st.IssuedTotal,
		MeasuredRate: st.MeasuredRate, Held: st.Held}
}

// stats is one line's figures, as redisstore's stats script reads them.
func (s *Store) stats(l *line) queue.Stats {
	now := s.nowMs()
	st := queue.Stats{Waiting: int64(len(l.waiting)), IssuedTotal: l.d.issuedTotal, Held: l.d.held, RateReason: l.d.reason}
	for _, exp := range l.slots {
		if exp > now {
			st.Active++ // expired slots are free before a tick prunes them
		}
	}
	if l.d.hasEff {
		st.EffectiveRate = l.d.effective
	}
	if l.d.hasMeasured && l.d.lastTickMs > 0 && now-l.d.lastTickMs <= 5000 {
		st.MeasuredRate = l.d.measured
	}
	if dr := l.draw; dr != nil {
		st.Draw = &queue.Draw{State: dr.state, SeedSHA256: dr.sha, PreQueued: dr.count, Placed: dr.next - dr.base,
			StartedAt: msTime(dr.startedAt), DrawnAt: msTime(dr.drawnAt)}
		if dr.state == queue.DrawDrawn {
			st.Draw.Seed = dr.seed
		}
		if dr.state == queue.DrawScheduled {
			st.Draw.PreQueued = int64(len(l.prequeue))
		}
	}
	return st
}

// msTime is a time kept in ms as redisstore reads it: 0 is the zero time.
func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// alive reports whether a key expiring at until (ms) still exists at now.
func alive(until, now int64) bool { return now <= until }
