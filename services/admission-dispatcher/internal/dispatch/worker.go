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

// worker competes for one queue's lease and leads it while it holds it.
type worker struct {
	d    *Dispatcher
	q    string
	log  *slog.Logger
	stop context.CancelFunc
}

// run returns when ctx ends or the queue no longer exists.
func (w *worker) run(ctx context.Context) {
	// A standby tries once per tick, so a released lease is taken over
	// within a tick and a lapsed one within lease + tick.
	t := time.NewTicker(w.d.o.Tick)
	defer t.Stop()
	for {
		epoch, err := w.d.store.AcquireLease(ctx, w.q, w.d.o.Owner, w.d.o.Lease)
		switch {
		case errors.Is(err, queue.ErrNotFound):
			// Listed without configuration: deleted, or a leftover.
			w.unregister(ctx)
			return
		case err != nil && ctx.Err() == nil:
			w.log.Warn("acquire lease", "err", err)
		case epoch > 0:
			if gone := w.lead(ctx, epoch); gone {
				w.unregister(ctx)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// unregister takes the queue out of wr:queues once its keys are gone.
func (w *worker) unregister(ctx context.Context) {
	gone, err := w.d.store.Unregister(ctx, w.q)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			w.log.Warn("unregister queue", "err", err)
		}
	case gone:
		w.log.Info("queue removed: closed, and its last token is used or expired")
		w.d.m.forget(w.q)
	}
}

// lead runs the leader's loops until the lease is lost or ctx ends, then
// releases the lease if it still holds it. It reports whether the queue was
// closed out and deleted.
func (w *worker) lead(ctx context.Context, epoch int64) (gone bool) {
	log := w.log.With("epoch", epoch)
	log.Info("leading queue")
	w.d.m.leader.WithLabelValues(w.q).Set(1)
	defer w.d.m.leader.WithLabelValues(w.q).Set(0)

	lctx, lose := context.WithCancel(ctx)
	defer lose()
	// validUntil is when the lease may have lapsed, counted from the start
	// of the last successful renewal: past it, this replica stops issuing
	// even if no renewal has failed yet (a hung Redis call).
	var validUntil atomic.Int64
	validUntil.Store(time.Now().Add(w.d.o.Lease).UnixNano())

	var wg sync.WaitGroup
	wg.Go(func() { w.renew(lctx, lose, epoch, &validUntil, log) })
	w.d.relay.add(w.q)
	gone = w.tick(lctx, epoch, &validUntil, log)
	w.d.relay.remove(w.q)
	lose()
	wg.Wait()

	if ctx.Err() != nil && !gone { // shutting down, or the queue is no longer listed
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := w.d.store.ReleaseLease(rctx, w.q, w.d.o.Owner, epoch); err != nil {
			log.Warn("release lease", "err", err)
		} else {
			log.Info("lease released")
		}
	}
	return gone
}

func (w *worker) renew(ctx context.Context, lose context.CancelFunc, epoch int64, validUntil *atomic.Int64, log *slog.Logger) {
	t := time.NewTicker(w.d.o.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		ok, err := w.d.store.RenewLease(ctx, w.q, w.d.o.Owner, epoch, w.d.o.Lease)
		if err != nil || !ok {
			if ctx.Err() == nil {
				log.Warn("lease renewal failed: stepping down", "err", err, "held", ok)
			}
			lose()
			return
		}
		validUntil.Store(start.Add(w.d.o.Lease).UnixNano())
	}
}

// ticker is the state of one leadership's admission loop.
type ticker struct {
	rate     float64
	rateRead time.Time
	// applied is when the last tick that reached Redis started; the next
	// tick supplies grants for the span since then.
	applied time.Time
	held    string
	// failures counts ticks failed in a row; lastWarn rate-limits their log.
	failures int
	lastWarn time.Time
}

// failureLogEvery is how often a queue whose ticks keep failing logs it.
const failureLogEvery = 5 * time.Second

// tick runs admission ticks until leadership ends; it reports whether the
// queue was closed out and deleted.
func (w *worker) tick(ctx context.Context, epoch int64, validUntil *atomic.Int64, log *slog.Logger) (gone bool) {
	t := time.NewTicker(w.d.o.Tick)
	defer t.Stop()
	defer w.d.m.held.DeletePartialMatch(map[string]string{"queue": w.q})
	var st ticker
	for {
		if time.Now().UnixNano() >= validUntil.Load() {
			log.Warn("lease may have lapsed: stepping down")
			return false
		}
		// The rate decides how many fresh tokens a tick may need; it is
		// re-read every second, so a changed knob applies within a second.
		if time.Since(st.rateRead) >= time.Second {
			cfg, _, err := w.d.store.Config(ctx, w.q)
			switch {
			case errors.Is(err, queue.ErrNotFound):
				log.Info("queue has no configuration: stepping down")
				return false
			case err == nil:
				st.rate, st.rateRead = cfg.AdmissionRatePerSec, time.Now()
			}
		}
		if st.rate > 0 {
			lead, gone := w.issue(ctx, epoch, &st, log)
			if !lead {
				return gone
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// issue runs one admission tick. lead is false when leadership is over;
// gone when the queue was closed out and deleted.
func (w *worker) issue(ctx context.Context, epoch int64, st *ticker, log *slog.Logger) (lead, gone bool) {
	var since time.Duration
	if !st.applied.IsZero() {
		since = time.Since(st.applied)
	}
	grants, err := queue.Grants(queue.GrantsFor(st.rate, w.d.o.Tick, since))
	if err != nil {
		log.Error("token generation failed", "err", err)
		return true, false
	}
	start := time.Now()
	res, err := w.d.store.Issue(ctx, w.q, queue.IssueRequest{
		Epoch: epoch, Tick: w.d.o.Tick, OutboxBound: w.d.o.OutboxBound, Grants: grants,
	})
	w.d.m.tick.Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, queue.ErrStaleEpoch):
		log.Warn("fenced off: another replica leads now")
		return false, false
	case errors.Is(err, queue.ErrNotFound):
		return false, false
	case err != nil:
		// Not applied as far as we know (Redis away, a slot moving): the
		// tick is retried at the next one, whose span covers this one. A
		// failing queue logs its first failure and then every few seconds,
		// not ten times a second.
		st.failures++
		if ctx.Err() == nil && (st.failures == 1 || time.Since(st.lastWarn) >= failureLogEvery) {
			st.lastWarn = time.Now()
			log.Warn("issue failed; retrying every tick", "err", err, "failed_ticks", st.failures)
		}
		return true, false
	case res.Gone:
		w.d.relay.remove(w.q)
		return false, true
	}
	st.applied = start
	if st.failures > 0 {
		log.Info("issue works again", "failed_ticks", st.failures)
		st.failures = 0
	}
	if res.Held != st.held {
		if res.Held != "" {
			log.Warn("admission held", "reason", res.Held, "bound", w.d.o.OutboxBound, "waiting", res.Waiting)
			w.d.m.held.WithLabelValues(w.q, res.Held).Set(1)
		} else {
			log.Info("admission resumed", "after", st.held)
			w.d.m.held.WithLabelValues(w.q, st.held).Set(0)
		}
		st.held = res.Held
	}
	w.d.m.issued.WithLabelValues(w.q).Add(float64(res.Issued))
	w.d.m.expired.WithLabelValues(w.q).Add(float64(res.Expired))
	if res.Issued+res.Expired > 0 {
		w.d.relay.kick()
	}
	return true, false
}
