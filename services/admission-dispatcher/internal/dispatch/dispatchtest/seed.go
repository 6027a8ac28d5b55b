package dispatchtest

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// What puts state into the Store the way production does: the gateway's
// PUT (Configure), enter (Enter) and close (Close).

// Configure creates queue q with c, or changes it to c, as
// redisstore.UpdateConfig does: the queue is registered, a start time
// schedules a draw with a fresh seed, and a queue split into lines has its
// config copied to them. The line count of a queue with people in it
// cannot change (queue.ErrShardsFixed), nor a start time once its draw
// began (queue.ErrStarted).
func (s *Store) Configure(q string, c queue.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Shards = max(1, c.Shards)
	c.StartsAt = msTime(startsAtMs(c.StartsAt))
	l := s.line(q)
	cur := l.cfg
	next := &config{Config: c, version: 1}
	if cur == nil {
		key, err := queue.NewLineKey()
		if err != nil {
			return fmt.Errorf("configure %s: %w", q, err)
		}
		if next.key, err = queue.ParseLineKey(key); err != nil {
			return fmt.Errorf("configure %s: %w", q, err)
		}
	} else {
		next.version, next.key, next.drawPending = cur.version+1, cur.key, cur.drawPending
		if cur.Shards != c.Shards && !s.empty(q, cur.Shards) {
			return fmt.Errorf("configure %s: shards: %w", q, queue.ErrShardsFixed)
		}
		started := l.draw != nil && (l.draw.state == queue.DrawDrawing || l.draw.state == queue.DrawDrawn)
		if started && !c.StartsAt.Equal(cur.StartsAt) {
			return fmt.Errorf("configure %s: startsAt: %w", q, queue.ErrStarted)
		}
		for i := c.Shards; i < cur.Shards; i++ {
			delete(s.lines, queue.LineID(q, i)) // emptied by a smaller count
		}
	}
	if l.draw == nil && !c.StartsAt.IsZero() {
		seed, sha, err := queue.NewDrawSeed()
		if err != nil {
			return fmt.Errorf("configure %s: %w", q, err)
		}
		l.draw = &draw{state: queue.DrawScheduled, seed: seed, sha: sha}
		next.drawPending = true
	}
	l.cfg = next
	s.queues[q] = true
	if c.Shards > 1 {
		_, err := s.syncLines(q)
		return err
	}
	return nil
}

// empty reports whether nobody is in any of q's first shards lines:
// waiting, pre-queued or holding a slot.
func (s *Store) empty(q string, shards int) bool {
	for i := range shards {
		if l := s.lines[queue.LineID(q, i)]; l != nil && len(l.waiting)+len(l.prequeue)+len(l.slots) > 0 {
			return false
		}
	}
	return true
}

// Enter gives user a place in line q (the line queue.LineOf routes them
// to), or a place in its pre-queue before its start time, as redisstore's
// Enter does: someone already waiting, pre-queued or holding a token keeps
// what they have. It returns queue.ErrNotFound, queue.ErrClosed,
// queue.ErrFull, or queue.ErrChallengeRequired (a queue that asks for a
// challenge: the fake takes no proofs).
func (s *Store) Enter(q, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	main := s.lines[q]
	if main == nil || main.cfg == nil {
		return fmt.Errorf("enter %s: %w", q, queue.ErrNotFound)
	}
	l := s.lines[queue.LineID(q, queue.LineOf(main.cfg.key, user, main.cfg.Shards))]
	if l == nil || l.cfg == nil {
		return fmt.Errorf("enter %s: %w", q, queue.ErrNotFound)
	}
	now := s.nowMs()
	var drawing queue.DrawState
	if l.cfg.State != queue.Closed {
		_, drawing = s.schedule(l, now, true)
	}
	open := drawing == queue.DrawScheduled || drawing == queue.DrawDrawing
	prequeued := 0
	if open {
		prequeued = len(l.prequeue)
	}
	_, queued := l.prequeue[user]
	switch exp, holds := l.tokens[user]; {
	case holds && alive(exp, now):
		return nil // admitted already: their token back
	case l.cfg.State == queue.Closed:
		return fmt.Errorf("enter %s: %w", q, queue.ErrClosed)
	case slices.ContainsFunc(l.waiting, func(p place) bool { return p.user == user }), open && queued:
		return nil
	}
	limit := math.Min(float64(l.cfg.MaxQueueSize), math.Floor(float64(l.cfg.MaxWaitSeconds)*l.cfg.AdmissionRatePerSec))
	if int64(len(l.waiting)+prequeued) >= queue.LineShare(int64(limit), l.cfg.index, l.cfg.Shards) {
		return fmt.Errorf("enter %s: %w", q, queue.ErrFull)
	}
	if l.cfg.EnterChallenge == queue.ChallengeProofOfWork {
		return fmt.Errorf("enter %s: %w", q, queue.ErrChallengeRequired)
	}
	if drawing == queue.DrawScheduled {
		l.prequeue[user] = now
		return nil
	}
	l.seq++
	l.waiting = append(l.waiting, place{user, l.seq})
	if l.cfg.Shards > 1 {
		l.entered[user] = s.clock().UnixMicro()
	}
	return nil
}

// Close stops entries to q and drops its line and pre-queue, line by line,
// as redisstore's Close does; it returns how many people were in them.
// Tokens already issued stay valid.
func (s *Store) Close(q string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	main := s.lines[q]
	if main == nil || main.cfg == nil {
		return 0, fmt.Errorf("close %s: %w", q, queue.ErrNotFound)
	}
	var n int64
	for i := range main.cfg.Shards {
		l := s.lines[queue.LineID(q, i)]
		if l == nil || l.cfg == nil {
			continue
		}
		l.cfg.State = queue.Closed
		l.cfg.version++
		n += int64(len(l.waiting) + len(l.prequeue))
		l.waiting, l.prequeue, l.entered = nil, map[string]int64{}, map[string]int64{}
	}
	return n, nil
}

// LoseLineCopy deletes line's copy of q's config, as a config write whose
// writer died before it copied the config there leaves the line (until
// the leader's SyncLines writes it).
func (s *Store) LoseLineCopy(q string, line int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if line > 0 {
		s.line(queue.LineID(q, line)).cfg = nil
	}
}

func startsAtMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
