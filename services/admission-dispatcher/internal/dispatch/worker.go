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
	d   *Dispatcher
	q   string
	log *slog.Logger
}

func (w *worker) run(ctx context.Context) {
	// A standby tries once per tick, so a released lease is taken over
	// within a tick and a lapsed one within lease + tick.
	t := time.NewTicker(w.d.o.Tick)
	defer t.Stop()
	for {
		epoch, err := w.d.store.AcquireLease(ctx, w.q, w.d.o.Owner, w.d.o.Lease)
		switch {
		case err != nil && ctx.Err() == nil:
			w.log.Warn("acquire lease", "err", err)
		case epoch > 0:
			w.lead(ctx, epoch)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lead runs the leader's loops until the lease is lost or ctx ends, then
// releases the lease if it still holds it.
func (w *worker) lead(ctx context.Context, epoch int64) {
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
	wg.Go(func() { w.relay(lctx, log) })
	w.tick(lctx, epoch, &validUntil, log)
	lose()
	wg.Wait()

	if ctx.Err() != nil { // shutting down, or the queue is gone
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := w.d.store.ReleaseLease(rctx, w.q, w.d.o.Owner, epoch); err != nil {
			log.Warn("release lease", "err", err)
		} else {
			log.Info("lease released")
		}
	}
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

func (w *worker) tick(ctx context.Context, epoch int64, validUntil *atomic.Int64, log *slog.Logger) {
	t := time.NewTicker(w.d.o.Tick)
	defer t.Stop()
	var rate float64
	var rateRead time.Time
	for {
		if time.Now().UnixNano() >= validUntil.Load() {
			log.Warn("lease may have lapsed: stepping down")
			return
		}
		// The rate decides how many fresh tokens a tick may need; it is
		// re-read every second, so a changed knob applies within a second.
		if time.Since(rateRead) >= time.Second {
			cfg, _, err := w.d.store.Config(ctx, w.q)
			switch {
			case errors.Is(err, queue.ErrNotFound):
				log.Info("queue has no configuration: stepping down")
				return
			case err == nil:
				rate, rateRead = cfg.AdmissionRatePerSec, time.Now()
			}
		}
		if rate > 0 {
			if !w.issue(ctx, epoch, rate, log) {
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

// issue runs one admission tick; false means leadership is gone.
func (w *worker) issue(ctx context.Context, epoch int64, rate float64, log *slog.Logger) bool {
	n := queue.BatchCap(rate, w.d.o.Tick)
	grants := make([]queue.Grant, n)
	for i := range grants {
		g, err := queue.NewGrant()
		if err != nil {
			log.Error("token generation failed", "err", err)
			return true
		}
		grants[i] = g
	}
	start := time.Now()
	res, err := w.d.store.Issue(ctx, w.q, epoch, w.d.o.Tick, grants)
	w.d.m.tick.Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, queue.ErrStaleEpoch):
		log.Warn("fenced off: another replica leads now")
		return false
	case errors.Is(err, queue.ErrNotFound):
		return false
	case err != nil:
		if ctx.Err() == nil {
			log.Warn("issue", "err", err)
		}
		return true
	}
	w.d.m.issued.WithLabelValues(w.q).Add(float64(res.Issued))
	w.d.m.expired.WithLabelValues(w.q).Add(float64(res.Expired))
	return true
}
