package dispatchtest

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// IssueAll runs one tick of each call's line, with the rules of
// redisstore's lua/issue.lua: fenced by the epoch (queue.ErrStaleEpoch,
// before anything changes), the credit grows at the line's rate over the
// time since its last tick (none on its first) up to the batch cap, the
// head of the line is admitted in order within the credit, the grants, the
// outbox bound and the line's share of maxActive, and every admission and
// no-show is an event in the line's outbox.
func (s *Store) IssueAll(_ context.Context, calls []queue.IssueCall) []queue.IssueReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]queue.IssueReply, len(calls))
	for i, c := range calls {
		out[i].IssueResult, out[i].Err = s.issue(c)
	}
	return out
}

// tick is one issue call in progress: what issue.lua holds in locals.
type tick struct {
	s                *Store
	l                *line
	c                queue.IssueCall
	now, interval    int64
	rate, lineRate   float64
	adaptive         bool
	reason           string
	proposed         bool
	elapsed          int64
	credit, batchCap float64
}

func (s *Store) issue(c queue.IssueCall) (queue.IssueResult, error) {
	q := c.QueueID
	l := s.line(queue.LineID(q, c.Line))
	if c.Epoch != l.d.epoch {
		return queue.IssueResult{}, fmt.Errorf("issue %s at epoch %d: %w", q, c.Epoch, queue.ErrStaleEpoch)
	}
	if l.cfg == nil {
		return queue.IssueResult{}, fmt.Errorf("issue %s: %w", q, queue.ErrNotFound)
	}
	t := &tick{s: s, l: l, c: c, now: s.nowMs(), rate: l.cfg.AdmissionRatePerSec, reason: c.RateReason}
	if l.d.punctual > 0 {
		t.interval = max(0, t.now-l.d.punctual)
	}
	if t.adaptive = l.cfg.AdmissionMode == queue.AdmissionAdaptive; t.adaptive {
		r := t.rate
		if l.d.hasEff {
			r = l.d.effective
		}
		if t.proposed = c.Rate > 0; t.proposed {
			r = c.Rate
		}
		t.rate = math.Min(math.Max(r, l.cfg.MinAdmissionRatePerSec), l.cfg.MaxAdmissionRatePerSec)
	}
	t.lineRate = t.rate
	if c.Share > 0 {
		t.lineRate = t.rate * c.Share
	}
	if l.cfg.State == queue.Closed && len(l.waiting) == 0 && len(l.slots) == 0 && l.outboxLen() == 0 {
		// Done with: its keys go but the epoch, which keeps fencing the
		// leaders of a queue made again under this id, and the tokens and
		// markers, which expire on their own.
		gone := newLine()
		gone.d.epoch, gone.tokens, gone.markers = l.d.epoch, l.tokens, l.markers
		*l = *gone
		return queue.IssueResult{Gone: true}, nil
	}
	room := int64(1e15)
	if c.OutboxBound > 0 {
		room = c.OutboxBound - l.outboxLen()
	}
	last := t.now
	if l.d.lastTickMs > 0 {
		last = l.d.lastTickMs
	}
	t.elapsed = max(0, t.now-last)
	tickMs := c.Tick.Milliseconds()
	span := min(max(tickMs, t.elapsed), queue.CatchUpSpan(c.Tick).Milliseconds())
	t.batchCap = math.Ceil(t.lineRate*float64(span)/1000) + 1
	t.credit = math.Min(l.d.credit+t.lineRate*float64(t.elapsed)/1000, t.batchCap)
	if l.cfg.State != queue.Closed {
		if _, drawing := s.schedule(l, t.now, true); drawing == queue.DrawDrawing {
			return t.held(queue.HeldDraw, true), nil
		}
	}
	if room <= 0 {
		return t.held(queue.HeldOutboxBacklog, false), nil
	}
	return t.admit(room), nil
}

// admit prunes the slots that expired and, on an open queue, admits the
// head of the line.
func (t *tick) admit(room int64) queue.IssueResult {
	l, c, now := t.l, t.c, t.now
	var stale []string
	for u, exp := range l.slots {
		if exp <= now {
			stale = append(stale, u)
		}
	}
	slices.SortFunc(stale, func(a, b string) int { // ZRANGEBYSCORE's order
		return cmp.Or(cmp.Compare(l.slots[a], l.slots[b]), strings.Compare(a, b))
	})
	stale = stale[:min(int64(len(stale)), min(1000, room))]
	expiring := 0
	for _, u := range stale {
		if m, ok := l.markers[u]; ok && alive(m.until, now) && m.state == statusIssued {
			expiring++
		}
	}
	waiting := int64(len(l.waiting))
	var n int64
	var heads []int64
	if l.cfg.State == queue.Open {
		n = min(int64(math.Floor(t.credit)), int64(t.batchCap), int64(len(c.Grants)), waiting, room-int64(expiring))
		if l.cfg.MaxActive > 0 {
			limit := queue.LineShare(l.cfg.MaxActive, l.cfg.index, l.cfg.Shards)
			n = min(n, max(0, limit-(int64(len(l.slots))-int64(len(stale)))))
		}
		n = max(n, 0)
		if want := int64(c.Heads); l.cfg.Shards > 1 && want > 0 {
			heads = []int64{}
			for _, p := range l.waiting[n:min(waiting, n+want)] {
				heads = append(heads, l.entered[p.user])
			}
		}
	}
	expired := 0
	for _, u := range stale {
		delete(l.slots, u)
		if m, ok := l.markers[u]; ok && alive(m.until, now) && m.state == statusIssued {
			l.markers[u] = marker{state: statusExpired, tid: m.tid, until: m.until}
			l.emit(t.s, queue.Event{Type: queue.EventTokenExpired, ID: m.tid + ".expired", QueueID: c.QueueID, UserID: u,
				TokenID: m.tid, Reason: "NO_SHOW", OccurredAt: msTime(now), TraceParent: c.TraceParent, TraceState: traceState(c)})
			expired++
		}
	}
	if l.cfg.State != queue.Open {
		l.d.hasMeasured = false
		l.d.credit, l.d.lastTickMs, l.d.held, l.d.punctual = 0, now, "", now
		return t.done(queue.IssueResult{Paused: true, Expired: expired, Waiting: waiting})
	}
	ttl, spread := l.cfg.TokenTTLSeconds*1000, l.cfg.ActivationSpreadMs
	admitted := make([]queue.Event, 0, n)
	for i, p := range l.waiting[:n] {
		g := c.Grants[i]
		tid := queue.LineToken(c.Line, g.TokenID)
		activate := now + spread*int64(i)/n
		expires := activate + ttl
		l.tokens[p.user] = expires
		l.markers[p.user] = marker{state: statusIssued, tid: tid, until: expires + 120_000}
		l.slots[p.user] = expires
		delete(l.entered, p.user)
		admitted = append(admitted, queue.Event{Type: queue.EventTokenIssued, ID: tid + ".issued", QueueID: c.QueueID, UserID: p.user,
			TokenID: tid, Seq: p.seq, ActivateAt: msTime(activate), ExpiresAt: msTime(expires), OccurredAt: msTime(now),
			TraceParent: c.TraceParent, TraceState: traceState(c)})
	}
	l.emitAll(t.s, admitted) // one entry, as issue.lua writes them
	l.waiting = slices.Clone(l.waiting[n:])
	l.d.issuedTotal += n
	l.d.credit, l.d.lastTickMs, l.d.held, l.d.punctual = t.credit-float64(n), now, "", now
	l.d.measured, l.d.hasMeasured = t.measure(waiting, n), true
	r := t.done(queue.IssueResult{Issued: int(n), Expired: expired, Waiting: waiting - n})
	if heads != nil {
		r.HeadsRead, r.Heads = true, heads
	}
	return r
}

// held answers a tick that admits nobody for why, and prunes nothing.
func (t *tick) held(why string, idle bool) queue.IssueResult {
	waiting := int64(len(t.l.waiting))
	busy := waiting
	if idle {
		busy = 0
	}
	d := &t.l.d
	d.credit, d.lastTickMs, d.held = t.credit, t.now, why
	d.measured, d.hasMeasured = t.measure(busy, 0), true
	return t.done(queue.IssueResult{Held: why, Waiting: waiting})
}

// measure is the measured rate after this tick: an average over about
// five seconds of what the ticks admitted while people waited.
func (t *tick) measure(waiting, issued int64) float64 {
	m := t.lineRate
	if t.l.d.hasMeasured {
		m = t.l.d.measured
	}
	if t.elapsed > 0 {
		target := t.lineRate
		if waiting > 0 {
			target = float64(issued) * 1000 / float64(t.elapsed)
		}
		m += (1 - math.Exp(-float64(t.elapsed)/5000)) * (target - m)
	}
	return m
}

// done fills what every answered tick reports and records an ADAPTIVE
// queue's rate.
func (t *tick) done(r queue.IssueResult) queue.IssueResult {
	cfg, d := t.l.cfg, &t.l.d
	r.Rate = luaNumber(t.rate)
	r.Mode = cfg.AdmissionMode
	if r.Mode == "" {
		r.Mode = queue.AdmissionFixed
	}
	r.MinRate, r.MaxRate = cfg.MinAdmissionRatePerSec, cfg.MaxAdmissionRatePerSec
	r.TargetLatency = time.Duration(cfg.TargetOrderLatencyMs) * time.Millisecond
	r.ConfigVersion, r.Interval = cfg.version, time.Duration(t.interval)*time.Millisecond
	switch {
	case t.adaptive:
		d.effective, d.hasEff = t.rate, true
		if t.proposed {
			d.reason = t.reason
		}
	default:
		d.effective, d.hasEff, d.reason = 0, false, ""
	}
	return r
}

const (
	statusIssued  = "TOKEN_ISSUED"
	statusExpired = "EXPIRED"
)

// traceState is the tracestate an event carries: only with a traceparent.
func traceState(c queue.IssueCall) string {
	if c.TraceParent == "" {
		return ""
	}
	return c.TraceState
}

// luaNumber is f as a Lua script answers it: tostring's 14 significant
// digits.
func luaNumber(f float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 14, 64), 64)
	return r
}
