package dispatch

import (
	"context"
	"errors"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// A queue split into lines (queue/lines.go) is led as one: line 0's lease
// (the queue's) is the leader's, and before its first tick the leader
// copies the config to the other lines and raises their epochs to its own
// (follow), so a fenced-off ex-leader can issue on none of them. Every tick
// then ticks each line at its share of the queue's rate: the part of the
// queue's earliest arrivals that is in the line (queue.ArrivalShares), from
// the enter times the lines' previous ticks reported. So the queue is
// admitted in the order people came, whichever line they are in, and a
// line made long by junk behind someone is no faster for them. Each line
// keeps its own credit, batch cap, slots (its share of maxActive), outbox
// and frontier; the shares add up to the queue's rate.

// lineState is what the leader knows of one line of its queue.
type lineState struct {
	// heads is the front of the line after its last tick that read it
	// (its length, the enter times of its first people).
	heads queue.LineHeads
	// gone: the line was closed and is done with (its keys deleted).
	gone bool
}

// follow makes lines 1 and up of ls's queue follow this leader: their
// config copied, their epochs raised. It reports whether the queue may be
// ticked; false with the lease lost when a newer leader took a line.
func (l *leases) follow(ctx context.Context, ls *leadership) bool {
	if ls.followed {
		return true
	}
	if _, err := l.store.SyncLines(ctx, ls.q); err != nil {
		if ctx.Err() == nil {
			l.warn.every("copy the config to the lines", "queue", ls.q, "err", err)
		}
		return false
	}
	lines := make([]queue.LineLease, 0, len(ls.lines)-1)
	for i := 1; i < len(ls.lines); i++ {
		lines = append(lines, queue.LineLease{QueueID: ls.q, Line: i, Epoch: ls.epoch})
	}
	for i, r := range l.store.FollowLeases(ctx, l.owner, lines) {
		switch {
		case r.Err != nil:
			if ctx.Err() == nil {
				l.warn.every("raise the lines' epochs", "queue", ls.q, "line", lines[i].Line, "err", r.Err)
			}
			return false
		case r.Epoch != ls.epoch:
			l.stepDown(ls, "fenced off: another replica leads a line now", "line", lines[i].Line)
			return false
		}
	}
	ls.followed = true
	for i := 1; i < len(ls.lines); i++ {
		l.relay.add(queue.LineID(ls.q, i))
	}
	ls.log.Info("lines follow", "lines", len(ls.lines))
	return true
}

// lineCalls are the tick's calls for ls's lines not gone, each at its
// share of the rate, with the grants that share needs, asking each line for
// the enter times of its next people (one tick's worth at the rate).
func lineCalls(ls *leadership, r queue.IssueRequest, grants func(line int, rate float64) ([]queue.Grant, error), rate float64) ([]queue.IssueCall, error) {
	if len(ls.lines) <= 1 {
		g, err := grants(0, rate)
		if err != nil {
			return nil, err
		}
		r.Grants = g
		return []queue.IssueCall{{QueueID: ls.q, IssueRequest: r}}, nil
	}
	heads := make([]queue.LineHeads, len(ls.lines))
	for i, s := range ls.lines {
		heads[i] = s.heads
	}
	window := queue.ArrivalWindow(rate, r.Tick)
	shares := queue.ArrivalShares(heads, window)
	r.Heads = window
	var calls []queue.IssueCall
	for i, s := range ls.lines {
		if s.gone {
			continue
		}
		g, err := grants(i, rate*shares[i])
		if err != nil {
			return nil, err
		}
		c := queue.IssueCall{QueueID: ls.q, Line: i, IssueRequest: r}
		// A line nobody waits in still ticks (slots expire, a pause is
		// recorded) at a share that admits nobody.
		c.Grants, c.Share = g, max(shares[i], 1e-9)
		calls = append(calls, c)
	}
	return calls, nil
}

// lineApplied records a line's tick reply; it reports whether every line
// of the queue is now gone.
func (ls *leadership) lineApplied(line int, r queue.IssueReply) bool {
	if line >= len(ls.lines) {
		return false
	}
	if r.Gone {
		ls.lines[line].gone = true
	} else if r.Err == nil {
		h := &ls.lines[line].heads
		h.Waiting = r.Waiting
		if r.HeadsRead {
			h.Known, h.Times = true, r.Heads
		}
	}
	for _, s := range ls.lines {
		if !s.gone {
			return false
		}
	}
	return true
}

// lineBehind reports whether a line's reply shows a config copy behind the
// queue's (line 0's version, from the same round): the leader copies again.
func lineBehind(replies []queue.IssueReply, calls []queue.IssueCall) bool {
	var version int64 = -1
	for i, c := range calls {
		if c.Line == 0 && replies[i].Err == nil && !replies[i].Gone {
			version = replies[i].ConfigVersion
		}
	}
	for i, c := range calls {
		if c.Line > 0 && (errors.Is(replies[i].Err, queue.ErrNotFound) ||
			(version >= 0 && replies[i].Err == nil && !replies[i].Gone && replies[i].ConfigVersion != version)) {
			return true
		}
	}
	return false
}
