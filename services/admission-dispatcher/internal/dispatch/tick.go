package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// tick runs one admission tick of every queue led, in one round.
func (l *leader) tick(ctx context.Context) {
	var calls []queue.IssueCall
	var ticking []*leadership
	for _, ls := range l.leadings() {
		l.mu.Lock()
		lapsed := time.Now().After(ls.validUntil)
		l.mu.Unlock()
		if lapsed {
			l.stepDown(ls, "the lease may have lapsed")
			continue
		}
		if ls.rate <= 0 {
			// A new leader reads the rate once; after that each tick's
			// reply carries it, so a changed knob applies at the next tick.
			cfg, _, err := l.d.store.Config(ctx, ls.q)
			if err != nil {
				continue // a missing queue is found by acquire; Redis away: next tick
			}
			ls.rate = cfg.AdmissionRatePerSec
		}
		var since time.Duration
		if !ls.applied.IsZero() {
			since = time.Since(ls.applied)
		}
		rate, why := l.propose(ls, time.Now())
		grants, err := queue.Grants(queue.GrantsFor(max(ls.rate, rate), l.d.o.Tick, since))
		if err != nil {
			ls.log.Error("token generation failed", "err", err)
			continue
		}
		calls = append(calls, queue.IssueCall{QueueID: ls.q, IssueRequest: queue.IssueRequest{
			Epoch: ls.epoch, Tick: l.d.o.Tick, OutboxBound: l.d.o.OutboxBound, Grants: grants,
			Rate: rate, RateReason: why,
		}})
		ticking = append(ticking, ls)
	}
	if len(calls) == 0 {
		return
	}
	start := time.Now()
	replies := l.d.store.IssueAll(ctx, calls)
	l.d.m.Ticked(time.Since(start))
	wrote := false
	for i, r := range replies {
		wrote = l.applied(ctx, ticking[i], start, r) || wrote
	}
	if wrote {
		l.d.relay.kick()
	}
}

// applied handles one queue's tick reply; it reports whether the tick wrote
// events for the relay.
func (l *leader) applied(ctx context.Context, ls *leadership, start time.Time, r queue.IssueReply) bool {
	switch {
	case errors.Is(r.Err, queue.ErrStaleEpoch):
		l.stepDown(ls, "fenced off: another replica leads now")
		return false
	case errors.Is(r.Err, queue.ErrNotFound):
		l.stepDown(ls, "queue has no configuration")
		return false
	case r.Err != nil:
		// Not applied as far as we know (Redis away, a slot moving): the
		// tick is retried at the next one, whose span covers this one.
		ls.failures++
		if ctx.Err() == nil && (ls.failures == 1 || time.Since(ls.lastWarn) >= failureLogEvery) {
			ls.lastWarn = time.Now()
			ls.log.Warn("issue failed; retrying every tick", "err", r.Err, "failed_ticks", ls.failures)
		}
		return false
	case r.Gone:
		l.stepDown(ls, "queue closed and done with")
		l.unregister(ctx, ls.q)
		return false
	}
	ls.applied, ls.rate = start, r.Rate
	ls.mode, ls.minRate, ls.maxRate, ls.target = r.Mode, r.MinRate, r.MaxRate, r.TargetLatency
	l.d.m.Rate(ls.q, r.Rate)
	if ls.failures > 0 {
		ls.log.Info("issue works again", "failed_ticks", ls.failures)
		ls.failures = 0
	}
	if r.Held != ls.held {
		if r.Held != "" {
			level := slog.LevelWarn
			if r.Held == queue.HeldDraw {
				level = slog.LevelInfo // the start of a scheduled sale, not a fault
			}
			ls.log.Log(ctx, level, "admission held", "reason", r.Held, "bound", l.d.o.OutboxBound, "waiting", r.Waiting)
			l.d.m.Held(ls.q, r.Held)
		} else {
			ls.log.Info("admission resumed", "after", ls.held)
			l.d.m.Resumed(ls.q, ls.held)
		}
		ls.held = r.Held
	}
	if r.Held == queue.HeldDraw {
		l.startDraw(ctx, ls)
	}
	l.d.m.Admitted(ls.q, r.Issued, r.Expired)
	return r.Issued+r.Expired > 0
}
