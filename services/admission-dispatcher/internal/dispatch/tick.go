package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

var tracer = telemetry.Tracer("services/admission-dispatcher")

// tick runs one admission tick of every queue led, in one round.
func (l *leader) tick(ctx context.Context) {
	var calls []queue.IssueCall
	var ticking []*leadership // ticking[i] leads calls[i]
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
			l.mu.Lock() // stepDown, on the renewal goroutine, reads the count
			ls.readLines(cfg)
			l.mu.Unlock()
		}
		if !l.follow(ctx, ls) {
			continue
		}
		var since time.Duration
		if !ls.applied.IsZero() {
			since = time.Since(ls.applied)
		}
		rate, why := l.propose(ls, time.Now())
		qcalls, err := lineCalls(ls, queue.IssueRequest{
			Epoch: ls.epoch, Tick: l.d.o.Tick, OutboxBound: l.d.o.OutboxBound, Rate: rate, RateReason: why,
		}, func(line int, r float64) ([]queue.Grant, error) {
			return l.d.o.Tokens.Grants(ls.q, line, queue.GrantsFor(r, l.d.o.Tick, since), time.Now())
		}, max(ls.rate, rate))
		if err != nil {
			ls.log.Error("token generation failed", "err", err)
			continue
		}
		for range qcalls {
			ticking = append(ticking, ls)
		}
		calls = append(calls, qcalls...)
	}
	if len(calls) == 0 {
		return
	}
	ctx, span := tracer.Start(ctx, "admission tick", trace.WithAttributes(attribute.Int("waitingroom.calls", len(calls))))
	defer span.End()
	if tp, ts := telemetry.Context(ctx); tp != "" {
		for i := range calls {
			calls[i].TraceParent, calls[i].TraceState = tp, ts
		}
	}
	start := time.Now()
	replies := l.d.store.IssueAll(ctx, calls)
	l.d.m.Ticked(time.Since(start))
	linkAdmitted(span, replies)
	wrote := false
	for i, r := range replies {
		ls := ticking[i]
		if len(ls.lines) > 1 {
			wrote = l.lineTicked(ctx, ls, start, calls[i].Line, r) || wrote
			continue
		}
		wrote = l.applied(ctx, ls, start, r) || wrote
	}
	for i := 0; i < len(calls); {
		ls, j := ticking[i], i
		for j < len(calls) && ticking[j] == ls {
			j++
		}
		if len(ls.lines) > 1 && lineBehind(replies[i:j], calls[i:j]) {
			ls.followed = false // copy the config again before the next tick
		}
		i = j
	}
	if wrote {
		l.d.relay.kick()
	}
}

// linkAdmitted links the tick's span to the enter of every person it
// admitted whose enter was traced, and counts them on it.
func linkAdmitted(span trace.Span, replies []queue.IssueReply) {
	if !span.IsRecording() {
		return
	}
	issued := 0
	for _, r := range replies {
		issued += r.Issued
		for _, tp := range r.Traces {
			if link, ok := telemetry.Link(tp); ok {
				link.Attributes = []attribute.KeyValue{attribute.String("waitingroom.link", "admitted")}
				span.AddLink(link)
			}
		}
	}
	span.SetAttributes(attribute.Int("waitingroom.issued", issued))
}

// lineTicked handles the tick reply of one line of a queue split into
// lines: line 0's is the queue's (its rate, mode, held state and draw),
// the others' count their admissions and lengths; the queue is done with
// once every line is gone.
func (l *leader) lineTicked(ctx context.Context, ls *leadership, start time.Time, line int, r queue.IssueReply) bool {
	allGone := ls.lineApplied(line, r)
	if r.Err == nil && !r.Gone {
		l.d.m.LineTicked(ls.q, line, r.Issued, r.Waiting)
	}
	switch {
	case r.Gone && allGone:
		l.stepDown(ls, "queue closed and done with")
		l.unregister(ctx, ls.q)
		return false
	case r.Gone, errors.Is(r.Err, queue.ErrNotFound) && line > 0:
		return false
	case line == 0:
		return l.applied(ctx, ls, start, r)
	case errors.Is(r.Err, queue.ErrStaleEpoch):
		l.stepDown(ls, "fenced off: another replica leads a line now", "line", line)
		return false
	case r.Err != nil:
		if ctx.Err() == nil {
			l.warnEvery("issue failed on a line", "queue", ls.q, "line", line, "err", r.Err)
		}
		return false
	case r.Held == queue.HeldDraw:
		l.startDraw(ctx, ls) // one draw goroutine runs every line's
	}
	l.d.m.Admitted(ls.q, r.Issued, r.Expired)
	return r.Issued+r.Expired > 0
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
	if r.Interval > 0 && !r.Paused && r.Held == "" && r.Issued+int(r.Waiting) > 0 {
		l.d.m.Punctual(ls.q, r.Interval)
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
