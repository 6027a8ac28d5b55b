package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// leader holds this replica's leases and runs its admission ticks. Every
// tick it tries, in one pipelined round, to take the lease of each queue it
// serves and does not lead, then ticks every queue it leads in one more
// round; renewals go in one round every third of the lease, from a loop of
// their own so a slow tick cannot make a lease lapse. A replica leading
// hundreds of queues thus makes a few round trips per tick, not several per
// queue, and its ticks never queue for the connection pool.
type leader struct {
	d *Dispatcher

	mu     sync.Mutex
	served map[string]bool
	led    map[string]*leadership
	// warned rate-limits the log of rounds that keep failing.
	warned map[string]time.Time
	// health has the rate controller of each served queue, fed by the
	// order-service's health reports.
	health map[string]*queue.RateController
}

// leadership is this replica's hold on one queue.
type leadership struct {
	q     string
	epoch int64
	log   *slog.Logger
	// validUntil is when the lease may have lapsed, counted from the start
	// of the last successful renewal: past it, this replica stops issuing
	// even if no renewal has failed yet (a hung Redis call). Guarded by
	// leader.mu.
	validUntil time.Time
	// The tick state below is only touched by the tick loop.
	rate float64
	// mode and the ADAPTIVE knobs, as the last tick reply told them.
	mode             queue.AdmissionMode
	minRate, maxRate float64
	target           time.Duration
	// applied is when the last tick that reached Redis started; the next
	// tick supplies grants for the span since then.
	applied time.Time
	held    string
	// drawing is set while a goroutine draws the queue's pre-queue.
	drawing atomic.Bool
	// failures counts ticks failed in a row; lastWarn rate-limits their log.
	failures int
	lastWarn time.Time
	// lines is the queue's lines (one for a queue not split; see
	// lines.go), read from the config by the first tick; followed is set
	// once lines 1 and up follow this leader's epoch.
	lines    []lineState
	followed bool
}

// Reasons to step down that are not faults.
const (
	whyShutdown = "shutting down"
	whyUnlisted = "queue no longer listed"
)

// failureLogEvery is how often something that keeps failing is logged.
const failureLogEvery = 5 * time.Second

func newLeader(d *Dispatcher) *leader {
	return &leader{d: d, served: map[string]bool{}, led: map[string]*leadership{}, warned: map[string]time.Time{},
		health: map[string]*queue.RateController{}}
}

// serve sets the queues this replica competes for. A queue it leads and no
// longer serves (gone from wr:queues) has its lease released.
func (l *leader) serve(ctx context.Context, ids []string) {
	l.mu.Lock()
	l.served = map[string]bool{}
	for _, q := range ids {
		l.served[q] = true
	}
	for q := range l.health {
		if !l.served[q] {
			delete(l.health, q)
		}
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

// warnEvery logs a failure of kind at most once per failureLogEvery.
func (l *leader) warnEvery(kind string, args ...any) {
	l.mu.Lock()
	last := l.warned[kind]
	ok := time.Since(last) >= failureLogEvery
	if ok {
		l.warned[kind] = time.Now()
	}
	l.mu.Unlock()
	if ok {
		l.d.log.Warn(kind, args...)
	}
}

// tickLoop acquires and ticks until ctx ends.
func (l *leader) tickLoop(ctx context.Context) {
	t := time.NewTicker(l.d.o.Tick)
	defer t.Stop()
	for {
		l.acquire(ctx)
		l.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// acquire tries to take every served queue nobody here leads. A standby
// tries once per tick, so a released lease is taken over within a tick and
// a lapsed one within lease + tick.
func (l *leader) acquire(ctx context.Context) {
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
	replies := l.d.store.AcquireLeases(ctx, l.d.o.Owner, qs, l.d.o.Lease)
	for i, r := range replies {
		q := qs[i]
		switch {
		case errors.Is(r.Err, queue.ErrNotFound):
			// Listed without configuration: deleted, or a leftover.
			l.unregister(ctx, q)
		case r.Err != nil:
			if ctx.Err() == nil {
				l.warnEvery("acquire lease", "queue", q, "err", r.Err)
			}
		case r.Epoch > 0:
			ls := &leadership{q: q, epoch: r.Epoch, log: l.d.log.With("queue", q, "epoch", r.Epoch), validUntil: start.Add(l.d.o.Lease)}
			l.mu.Lock()
			l.led[q] = ls
			l.mu.Unlock()
			ls.log.Info("leading queue")
			l.d.m.Leading(q)
			l.d.relay.add(q)
		}
	}
}

// leadings returns the leaderships held now.
func (l *leader) leadings() []*leadership {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*leadership, 0, len(l.led))
	for _, ls := range l.led {
		out = append(out, ls)
	}
	return out
}

// stepDown stops leading ls's queue, if ls is still the current hold on it.
func (l *leader) stepDown(ls *leadership, why string, args ...any) {
	l.mu.Lock()
	current := l.led[ls.q] == ls
	if current {
		delete(l.led, ls.q)
	}
	// The renewal goroutine steps down too: the line count is read under
	// the lock the tick goroutine sets it under (readLines).
	lines := len(ls.lines)
	l.mu.Unlock()
	if !current {
		return
	}
	level := slog.LevelWarn
	if why == whyShutdown || why == whyUnlisted {
		level = slog.LevelInfo
	}
	ls.log.Log(context.Background(), level, "stepping down: "+why, args...)
	l.d.relay.remove(ls.q)
	for i := 1; i < lines; i++ {
		l.d.relay.remove(queue.LineID(ls.q, i))
	}
	l.d.m.SteppedDown(ls.q)
}

// release gives ls's lease up, so a standby takes over at its next attempt
// instead of after the lease runs out.
func (l *leader) release(ctx context.Context, ls *leadership) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := l.d.store.ReleaseLease(rctx, ls.q, l.d.o.Owner, ls.epoch); err != nil {
		ls.log.Warn("release lease", "err", err)
		return
	}
	ls.log.Info("lease released")
}

// releaseAll releases every lease held: the replica is shutting down.
func (l *leader) releaseAll(ctx context.Context) {
	for _, ls := range l.leadings() {
		l.stepDown(ls, whyShutdown)
		l.release(ctx, ls)
	}
}

// unregister takes q out of wr:queues once its keys are gone.
func (l *leader) unregister(ctx context.Context, q string) {
	l.mu.Lock()
	delete(l.served, q)
	l.mu.Unlock()
	removed, err := l.d.store.Unregister(ctx, q)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.d.log.Warn("unregister queue", "queue", q, "err", err)
		}
	case removed:
		l.d.log.Info("queue removed: closed, and its last token is used or expired", "queue", q)
		l.d.m.Forget(q)
	}
}

// renewLoop renews every lease held, in one round every third of the lease,
// until ctx ends.
func (l *leader) renewLoop(ctx context.Context) {
	t := time.NewTicker(l.d.o.Lease / 3)
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
		replies := l.d.store.RenewLeases(ctx, l.d.o.Owner, leases, l.d.o.Lease)
		for i, r := range replies {
			ls := held[i]
			switch {
			case r.Err != nil:
				// Not renewed this round; the lease may still be held.
				// If it stays so, validUntil passes and the tick loop
				// steps down.
				if ctx.Err() == nil {
					l.warnEvery("renew lease", "queue", ls.q, "err", r.Err)
				}
			case r.Epoch == 0:
				l.stepDown(ls, "lease lost")
			default:
				l.mu.Lock()
				ls.validUntil = start.Add(l.d.o.Lease)
				l.mu.Unlock()
			}
		}
	}
}
