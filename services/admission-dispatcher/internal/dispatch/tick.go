package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

var tracer = telemetry.Tracer("services/admission-dispatcher")

// ticks owns admission: every tick it has the leases taken that can be
// (acquire), then ticks every queue led in one pipelined round, steering
// an ADAPTIVE queue's rate from the order-service's health reports, and
// starts the draw of a queue whose sale started. Its goroutine (run) alone
// touches each leadership's tickState; the draws run in goroutines of
// their own that run waits for before it returns.
type ticks struct {
	store       TickStore
	leases      *leases
	relay       *relay
	health      *healthReports
	tokens      *grant.Signer
	log         *slog.Logger
	m           Metrics
	warn        *warnings
	every       time.Duration // Options.Tick
	outboxBound int64
	drawChunk   int
	draws       sync.WaitGroup
}

// tickState is what the ticks know of one led queue.
type tickState struct {
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
}

func newTicks(store TickStore, leases *leases, relay *relay, health *healthReports, log *slog.Logger, m Metrics, warn *warnings, o Options) *ticks {
	return &ticks{store: store, leases: leases, relay: relay, health: health, tokens: o.Tokens, log: log, m: m, warn: warn,
		every: o.Tick, outboxBound: o.OutboxBound, drawChunk: o.DrawChunk}
}

// run acquires and ticks until ctx ends, then waits for the draws it
// started; the Dispatcher's Run starts it and waits for it.
func (t *ticks) run(ctx context.Context) {
	defer t.draws.Wait()
	every := time.NewTicker(t.every)
	defer every.Stop()
	for {
		t.leases.acquire(ctx)
		t.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		}
	}
}

// tick runs one admission tick of every queue led, in one round.
func (t *ticks) tick(ctx context.Context) {
	var calls []queue.IssueCall
	var ticking []*leadership // ticking[i] leads calls[i]
	for _, ls := range t.leases.leadings() {
		if t.leases.lapsed(ls) {
			t.leases.stepDown(ls, "the lease may have lapsed")
			continue
		}
		if ls.tick.rate <= 0 {
			// A new leader reads the rate once; after that each tick's
			// reply carries it, so a changed knob applies at the next tick.
			cfg, _, err := t.store.Config(ctx, ls.q)
			if err != nil {
				continue // a missing queue is found by acquire; Redis away: next tick
			}
			ls.tick.rate = cfg.AdmissionRatePerSec
			t.leases.readLines(ls, cfg)
		}
		if !t.leases.follow(ctx, ls) {
			continue
		}
		var since time.Duration
		if !ls.tick.applied.IsZero() {
			since = time.Since(ls.tick.applied)
		}
		rate, why := t.propose(ls, time.Now())
		qcalls, err := lineCalls(ls, queue.IssueRequest{
			Epoch: ls.epoch, Tick: t.every, OutboxBound: t.outboxBound, Rate: rate, RateReason: why, History: true,
			OrderPath: t.health.orderPath(ls.q, time.Now()),
		}, func(line int, r float64) ([]queue.Grant, error) {
			return t.tokens.Grants(ls.q, line, queue.GrantsFor(r, t.every, since), time.Now())
		}, max(ls.tick.rate, rate))
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
	replies := t.store.IssueAll(ctx, calls)
	t.m.Ticked(time.Since(start))
	linkAdmitted(span, replies)
	wrote := false
	for i, r := range replies {
		ls := ticking[i]
		if len(ls.lines) > 1 {
			wrote = t.lineTicked(ctx, ls, start, calls[i].Line, r) || wrote
			continue
		}
		wrote = t.applied(ctx, ls, start, r) || wrote
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
		t.relay.kick()
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
func (t *ticks) lineTicked(ctx context.Context, ls *leadership, start time.Time, line int, r queue.IssueReply) bool {
	allGone := ls.lineApplied(line, r)
	if r.Err == nil && !r.Gone {
		t.m.LineTicked(ls.q, line, r.Issued, r.Waiting)
	}
	switch {
	case r.Gone && allGone:
		t.leases.stepDown(ls, whyDone)
		t.leases.unregister(ctx, ls.q)
		return false
	case r.Gone, errors.Is(r.Err, queue.ErrNotFound) && line > 0:
		return false
	case line == 0:
		return t.applied(ctx, ls, start, r)
	case errors.Is(r.Err, queue.ErrStaleEpoch):
		t.leases.stepDown(ls, "fenced off: another replica leads a line now", "line", line)
		return false
	case r.Err != nil:
		if ctx.Err() == nil {
			t.warn.every("issue failed on a line", "queue", ls.q, "line", line, "err", r.Err)
		}
		return false
	case r.Held == queue.HeldDraw:
		t.startDraw(ctx, ls) // one draw goroutine runs every line's
	}
	t.m.Admitted(ls.q, r.Issued, r.Expired)
	return r.Issued+r.Expired > 0
}

// applied handles one queue's tick reply; it reports whether the tick wrote
// events for the relay.
func (t *ticks) applied(ctx context.Context, ls *leadership, start time.Time, r queue.IssueReply) bool {
	switch {
	case errors.Is(r.Err, queue.ErrStaleEpoch):
		t.leases.stepDown(ls, "fenced off: another replica leads now")
		return false
	case errors.Is(r.Err, queue.ErrNotFound):
		t.leases.stepDown(ls, "queue has no configuration")
		return false
	case r.Err != nil:
		// Not applied as far as we know (Redis away, a slot moving): the
		// tick is retried at the next one, whose span covers this one.
		ls.tick.failures++
		if ctx.Err() == nil && (ls.tick.failures == 1 || time.Since(ls.tick.lastWarn) >= failureLogEvery) {
			ls.tick.lastWarn = time.Now()
			ls.log.Warn("issue failed; retrying every tick", "err", r.Err, "failed_ticks", ls.tick.failures)
		}
		return false
	case r.Gone:
		t.leases.stepDown(ls, whyDone)
		t.leases.unregister(ctx, ls.q)
		return false
	}
	if r.Interval > 0 && !r.Paused && r.Held == "" && r.Issued+int(r.Waiting) > 0 {
		t.m.Punctual(ls.q, r.Interval)
	}
	ls.tick.applied, ls.tick.rate = start, r.Rate
	ls.tick.mode, ls.tick.minRate, ls.tick.maxRate, ls.tick.target = r.Mode, r.MinRate, r.MaxRate, r.TargetLatency
	t.m.Rate(ls.q, r.Rate)
	// What this tick admitted is recorded before the hold it may have
	// reached: a reader that sees the hold sees the admissions that led to it.
	t.m.Admitted(ls.q, r.Issued, r.Expired)
	if ls.tick.failures > 0 {
		ls.log.Info("issue works again", "failed_ticks", ls.tick.failures)
		ls.tick.failures = 0
	}
	if r.Held != ls.tick.held {
		if r.Held != "" {
			level := slog.LevelWarn
			if r.Held == queue.HeldDraw {
				level = slog.LevelInfo // the start of a scheduled sale, not a fault
			}
			ls.log.Log(ctx, level, "admission held", "reason", r.Held, "bound", t.outboxBound, "waiting", r.Waiting)
			t.m.Held(ls.q, r.Held)
		} else {
			ls.log.Info("admission resumed", "after", ls.tick.held)
			t.m.Resumed(ls.q, ls.tick.held)
		}
		ls.tick.held = r.Held
	}
	if r.Held == queue.HeldDraw {
		t.startDraw(ctx, ls)
	}
	return r.Issued+r.Expired > 0
}
