package dispatchtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// The draw of a queue's pre-queue, with the rules of redisstore's
// lua/draw.lua and the prelude's schedule: the first enter or tick after
// the start closes the pre-queue (its places reserved right after the last
// sequence number given), the leader announces, places in drawn order and
// finishes, each step fenced by the epoch and safe to repeat.

// draw is a line's draw hash.
type draw struct {
	state              queue.DrawState
	seed, sha          string
	base, count, next  int64
	startedAt, drawnAt int64 // ms
	announced          bool
}

// schedule is the line's start (ms, 0 for none) and the state of its draw
// ("" for a line without a pending draw); with closing, a start that came
// closes the pre-queue.
func (s *Store) schedule(l *line, now int64, closing bool) (int64, queue.DrawState) {
	starts := startsAtMs(l.cfg.StartsAt)
	if !l.cfg.drawPending {
		return starts, ""
	}
	var state queue.DrawState
	if l.draw != nil {
		state = l.draw.state
	}
	if closing && state == queue.DrawScheduled && (starts == 0 || now >= starts) {
		n := int64(len(l.prequeue))
		dr := l.draw
		dr.state, dr.base, dr.count, dr.next, dr.startedAt = queue.DrawDrawing, l.seq, n, l.seq, now
		l.seq += n
		state = queue.DrawDrawing
	}
	if starts == 0 && state != "" {
		starts = l.draw.startedAt
	}
	return starts, state
}

// StartDraw announces the draw of line id (a queue or one of its lines):
// QueueStarted goes to the outbox once (unless t.Quiet), and the people
// still pre-queued are returned to be placed. A line without a draw
// answers a zero DrawWork.
func (s *Store) StartDraw(_ context.Context, id string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, err := s.drawStep(id, epoch, func(q string, l *line) queue.DrawState {
		dr := l.draw
		if !dr.announced {
			if !t.Quiet {
				var starts int64
				if l.cfg != nil {
					starts = startsAtMs(l.cfg.StartsAt)
				}
				if starts <= 0 {
					starts = dr.startedAt
				}
				l.emit(s, queue.Event{Type: queue.EventQueueStarted, ID: "started." + dr.sha[:32], QueueID: q,
					StartsAt: msTime(starts), SeedSHA256: dr.sha, PreQueued: dr.count + t.OthersPreQueued,
					OccurredAt: msTime(dr.startedAt)})
			}
			dr.announced = true
		}
		return queue.DrawDrawing
	})
	if err != nil || w.State != queue.DrawDrawing {
		return w, err
	}
	l := s.lines[id]
	for u := range l.prequeue {
		w.Remaining = append(w.Remaining, u)
	}
	slices.SortFunc(w.Remaining, func(a, b string) int { // ZRANGE's order
		return cmp.Or(cmp.Compare(l.prequeue[a], l.prequeue[b]), strings.Compare(a, b))
	})
	return w, nil
}

// PlaceDrawn gives users, in the order given, the next places reserved for
// line id's pre-queue; users placed already or gone are skipped.
func (s *Store) PlaceDrawn(_ context.Context, id string, epoch int64, users []string) (queue.DrawWork, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drawStep(id, epoch, func(_ string, l *line) queue.DrawState {
		dr := l.draw
		for _, u := range users {
			if _, ok := l.prequeue[u]; !ok {
				continue
			}
			delete(l.prequeue, u)
			dr.next++
			at, _ := slices.BinarySearchFunc(l.waiting, dr.next, func(p place, seq int64) int { return cmp.Compare(p.seq, seq) })
			l.waiting = slices.Insert(l.waiting, at, place{u, dr.next})
		}
		return queue.DrawDrawing
	})
}

// FinishDraw ends line id's draw once nobody is left pre-queued: DRAWN,
// and QueueDrawn (the seed) to the outbox unless t.Quiet. While someone
// is, it changes nothing.
func (s *Store) FinishDraw(_ context.Context, id string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drawStep(id, epoch, func(q string, l *line) queue.DrawState {
		dr := l.draw
		if len(l.prequeue) > 0 {
			return queue.DrawDrawing
		}
		now := s.nowMs()
		dr.state, dr.drawnAt = queue.DrawDrawn, now
		if l.cfg != nil {
			l.cfg.drawPending = false
		}
		if !t.Quiet {
			l.emit(s, queue.Event{Type: queue.EventQueueDrawn, ID: "drawn." + dr.sha[:32], QueueID: q, Seed: dr.seed,
				SeedSHA256: dr.sha, PreQueued: dr.count + t.OthersPreQueued, Placed: dr.next - dr.base + t.OthersPlaced,
				FirstSeq: dr.base + 1, LastSeq: dr.next, OccurredAt: msTime(now)})
		}
		return queue.DrawDrawn
	})
}

// drawStep runs step on line id's draw while it is DRAWING, fenced by
// epoch, and answers the draw as it stands after it.
func (s *Store) drawStep(id string, epoch int64, step func(q string, l *line) queue.DrawState) (queue.DrawWork, error) {
	q, _, ok := queue.ParseLineID(id)
	if !ok {
		return queue.DrawWork{}, fmt.Errorf("draw %s: %w", id, queue.ErrNotFound)
	}
	l := s.line(id)
	if epoch != l.d.epoch {
		return queue.DrawWork{}, fmt.Errorf("draw %s at epoch %d: %w", id, epoch, queue.ErrStaleEpoch)
	}
	dr := l.draw
	if dr == nil {
		return queue.DrawWork{}, nil
	}
	state := dr.state
	if state == queue.DrawDrawing {
		state = step(q, l)
	}
	return queue.DrawWork{State: state, Seed: dr.seed, PreQueued: int64(len(l.prequeue)), Placed: dr.next - dr.base,
		Count: dr.count}, nil
}
