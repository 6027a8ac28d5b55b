package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// leases owns this replica's leadership: which queues it competes for,
// which it leads at which epoch, and until when each lease surely holds.
// Acquiring goes in one pipelined round per tick (the ticks call acquire
// before each tick, so a standby takes a released lease within a tick);
// renewing in one round every third of the lease, from run, a loop of its
// own, so a slow tick cannot make a lease lapse. A replica leading hundreds
// of queues thus makes a few round trips per tick, not several per queue.
//
// It tells the relay what to relay: a queue is relayed from the moment it
// is led (and its lines from the moment they follow) until it steps down.
type leases struct {
	store LeaseStore
	owner string
	ttl   time.Duration
	log   *slog.Logger
	m     Metrics
	relay *relay
	warn  *warnings

	mu     sync.Mutex
	served map[string]bool
	led    map[string]*leadership
}

// leadership is this replica's hold on one queue: its lease, owned by
// leases, and its admission state, owned by the ticks (their goroutine
// alone touches the fields below tick).
type leadership struct {
	q     string
	epoch int64
	log   *slog.Logger
	// validUntil is when the lease may have lapsed, counted from the start
	// of the last successful renewal: past it, this replica stops issuing
	// even if no renewal has failed yet (a hung Redis call). Guarded by
	// leases.mu.
	validUntil time.Time
	// lines is the queue's lines (one for a queue not split; see
	// lines.go), read from the config by the first tick under leases.mu
	// (stepDown reads their count from the renewal goroutine); followed is
	// set once lines 1 and up follow this leader's epoch.
	lines    []lineState
	followed bool

	tick tickState
}

// Reasons to step down that are not faults.
const (
	whyShutdown = "shutting down"
	whyUnlisted = "queue no longer listed"
	whyDone     = "queue closed and done with"
)

func newLeases(store LeaseStore, log *slog.Logger, m Metrics, relay *relay, warn *warnings, o Options) *leases {
	return &leases{store: store, owner: o.Owner, ttl: o.Lease, log: log, m: m, relay: relay, warn: warn,
		served: map[string]bool{}, led: map[string]*leadership{}}
}

// serve sets the queues this replica competes for. A queue it leads and no
// longer serves (gone from wr:queues) has its lease released.
func (l *leases) serve(ctx context.Context, ids []string) {
	l.mu.Lock()
	l.served = map[string]bool{}
	for _, q := range ids {
		l.served[q] = true
	}
	var dropped []*leadership
	for q, ls := range l.led {
		if !l.served[q] {
			dropped = append(dropped, ls)
		}
	}
	l.mu.Unlock()
	for _, ls := range dropped {
		l.stepDown(ls, whyUnlisted)
		l.release(ctx, ls)
	}
}

// acquire tries to take every served queue nobody here leads. A standby
// tries once per tick, so a released lease is taken over within a tick and
// a lapsed one within lease + tick.
func (l *leases) acquire(ctx context.Context) {
	l.mu.Lock()
	var qs []string
	for q := range l.served {
		if l.led[q] == nil {
			qs = append(qs, q)
		}
	}
	l.mu.Unlock()
	if len(qs) == 0 {
		return
	}
	start := time.Now()
	replies := l.store.AcquireLeases(ctx, l.owner, qs, l.ttl)
	for i, r := range replies {
		q := qs[i]
		switch {
		case errors.Is(r.Err, queue.ErrNotFound):
			// Listed without configuration: deleted, or a leftover.
			l.unregister(ctx, q)
		case r.Err != nil:
			if ctx.Err() == nil {
				l.warn.every("acquire lease", "queue", q, "err", r.Err)
			}
		case r.Epoch > 0:
			ls := &leadership{q: q, epoch: r.Epoch, log: l.log.With("queue", q, "epoch", r.Epoch), validUntil: start.Add(l.ttl)}
			l.mu.Lock()
			l.led[q] = ls
			l.mu.Unlock()
			ls.log.Info("leading queue")
			l.m.Leading(q)
			l.relay.add(q)
		}
	}
}

// leadings returns the leaderships held now.
func (l *leases) leadings() []*leadership {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*leadership, 0, len(l.led))
	for _, ls := range l.led {
		out = append(out, ls)
	}
	return out
}

// lapsed reports whether ls's lease may have run out by now.
func (l *leases) lapsed(ls *leadership) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().After(ls.validUntil)
}

// readLines learns ls's line count from the queue's config (the first
// tick of a new leader, which reads the config anyway).
func (l *leases) readLines(ls *leadership, cfg queue.Config) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(ls.lines) == max(1, cfg.Shards) {
		return
	}
	ls.lines = make([]lineState, max(1, cfg.Shards))
	ls.followed = len(ls.lines) == 1
}

// stepDown stops leading ls's queue, if ls is still the current hold on it.
func (l *leases) stepDown(ls *leadership, why string, args ...any) {
	l.mu.Lock()
	current := l.led[ls.q] == ls
	if current {
		delete(l.led, ls.q)
	}
	lines := len(ls.lines)
	l.mu.Unlock()
	if !current {
		return
	}
	level := slog.LevelWarn
	if why == whyShutdown || why == whyUnlisted || why == whyDone {
		level = slog.LevelInfo
	}
	ls.log.Log(context.Background(), level, "stepping down: "+why, args...)
	l.relay.remove(ls.q)
	for i := 1; i < lines; i++ {
		l.relay.remove(queue.LineID(ls.q, i))
	}
	l.m.SteppedDown(ls.q)
}

// release gives ls's lease up, so a standby takes over at its next attempt
// instead of after the lease runs out.
func (l *leases) release(ctx context.Context, ls *leadership) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := l.store.ReleaseLease(rctx, ls.q, l.owner, ls.epoch); err != nil {
		ls.log.Warn("release lease", "err", err)
		return
	}
	ls.log.Info("lease released")
}

// releaseAll releases every lease held: the replica is shutting down.
func (l *leases) releaseAll(ctx context.Context) {
	for _, ls := range l.leadings() {
		l.stepDown(ls, whyShutdown)
		l.release(ctx, ls)
	}
}

// unregister takes q out of wr:queues once its keys are gone.
func (l *leases) unregister(ctx context.Context, q string) {
	l.mu.Lock()
	delete(l.served, q)
	l.mu.Unlock()
	removed, err := l.store.Unregister(ctx, q)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.log.Warn("unregister queue", "queue", q, "err", err)
		}
	case removed:
		l.log.Info("queue removed: closed, and its last token is used or expired", "queue", q)
		l.m.Forget(q)
	}
}

// run renews every lease held, in one round every third of the lease,
// until ctx ends; the Dispatcher's Run starts it and waits for it.
func (l *leases) run(ctx context.Context) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held := l.leadings()
		if len(held) == 0 {
			continue
		}
		leases := make([]queue.Lease, len(held))
		for i, ls := range held {
			leases[i] = queue.Lease{QueueID: ls.q, Epoch: ls.epoch}
		}
		start := time.Now()
		replies := l.store.RenewLeases(ctx, l.owner, leases, l.ttl)
		for i, r := range replies {
			ls := held[i]
			switch {
			case r.Err != nil:
				// Not renewed this round; the lease may still be held.
				// If it stays so, validUntil passes and the ticks step
				// down.
				if ctx.Err() == nil {
					l.warn.every("renew lease", "queue", ls.q, "err", r.Err)
				}
			case r.Epoch == 0:
				l.stepDown(ls, "lease lost")
			default:
				l.mu.Lock()
				ls.validUntil = start.Add(l.ttl)
				l.mu.Unlock()
			}
		}
	}
}

// warnings logs something that keeps failing at most once per
// failureLogEvery per kind.
type warnings struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]time.Time
}

// failureLogEvery is how often something that keeps failing is logged.
const failureLogEvery = 5 * time.Second

func newWarnings(log *slog.Logger) *warnings {
	return &warnings{log: log, last: map[string]time.Time{}}
}

// every logs a failure of kind unless one was logged within failureLogEvery.
func (w *warnings) every(kind string, args ...any) {
	w.mu.Lock()
	ok := time.Since(w.last[kind]) >= failureLogEvery
	if ok {
		w.last[kind] = time.Now()
	}
	w.mu.Unlock()
	if ok {
		w.log.Warn(kind, args...)
	}
}
