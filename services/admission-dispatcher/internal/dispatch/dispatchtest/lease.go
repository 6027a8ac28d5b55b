package dispatchtest

import (
	"context"
	"fmt"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// The lease rules of redisstore's lua/lease.lua: a lease is "<owner>:<epoch>"
// with a time to live; taking it raises the queue's epoch to the larger of
// the last one plus one and the clock in ms, so the epoch never goes
// backwards, not even across the queue's deletion.

// held is l's lock if it has not run out.
func (s *Store) held(l *line) *lock {
	if l.lock != nil && !alive(l.lock.expires, s.nowMs()) {
		l.lock = nil
	}
	return l.lock
}

// AcquireLeases takes the lease of each queue in qs nobody holds for owner:
// a reply's Epoch is the new epoch, 0 when the lease is held (by anyone,
// owner included: each call is a new attempt), queue.ErrNotFound for a
// queue without config.
func (s *Store) AcquireLeases(_ context.Context, owner string, qs []string, ttl time.Duration) []queue.LeaseReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]queue.LeaseReply, len(qs))
	for i, q := range qs {
		l := s.line(q)
		switch {
		case s.held(l) != nil:
		case l.cfg == nil:
			out[i].Err = fmt.Errorf("acquire lease %s: %w", q, queue.ErrNotFound)
		default:
			l.d.epoch = max(l.d.epoch+1, s.nowMs())
			l.lock = &lock{owner: owner, epoch: l.d.epoch, expires: s.nowMs() + ttl.Milliseconds()}
			out[i].Epoch = l.d.epoch
		}
	}
	return out
}

// RenewLeases extends each of owner's leases held at its epoch by ttl from
// now: Epoch is the lease's while held, 0 when it was lost.
func (s *Store) RenewLeases(_ context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]queue.LeaseReply, len(leases))
	for i, ls := range leases {
		if lk := s.held(s.line(ls.QueueID)); lk != nil && lk.owner == owner && lk.epoch == ls.Epoch {
			lk.expires = s.nowMs() + ttl.Milliseconds()
			out[i].Epoch = ls.Epoch
		}
	}
	return out
}

// ReleaseLease gives owner's lease at epoch up; anyone else's, or one at
// another epoch, stays.
func (s *Store) ReleaseLease(_ context.Context, q, owner string, epoch int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.line(q)
	if lk := s.held(l); lk != nil && lk.owner == owner && lk.epoch == epoch {
		l.lock = nil
	}
	return nil
}

// FollowLeases raises each line's epoch to its leader's: Epoch is the
// leader's when the line follows it, 0 when the line has a higher one (a
// newer leader followed), queue.ErrNotFound for a line without its config
// copy.
func (s *Store) FollowLeases(_ context.Context, _ string, lines []queue.LineLease) []queue.LeaseReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]queue.LeaseReply, len(lines))
	for i, ll := range lines {
		id := queue.LineID(ll.QueueID, ll.Line)
		l := s.line(id)
		switch {
		case l.cfg == nil:
			out[i].Err = fmt.Errorf("follow lease %s: %w", id, queue.ErrNotFound)
		case ll.Epoch < l.d.epoch:
		default:
			l.d.epoch = ll.Epoch
			out[i].Epoch = ll.Epoch
		}
	}
	return out
}

// SyncLines copies q's config to each of its lines 1 and up whose copy is
// not at the queue's version (with a scheduled draw's seed for a line
// without a draw) and returns how many it wrote.
func (s *Store) SyncLines(_ context.Context, q string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncLines(q)
}

func (s *Store) syncLines(q string) (int, error) {
	main := s.lines[q]
	if main == nil || main.cfg == nil {
		return 0, fmt.Errorf("sync lines of %s: %w", q, queue.ErrNotFound)
	}
	wrote := 0
	for i := 1; i < main.cfg.Shards; i++ {
		l := s.line(queue.LineID(q, i))
		if l.cfg != nil && l.cfg.version == main.cfg.version && l.cfg.index == i {
			continue
		}
		c := *main.cfg
		c.index, c.key, c.drawPending = i, nil, l.cfg != nil && l.cfg.drawPending // the line's own fields
		if main.draw != nil && main.draw.state == queue.DrawScheduled {
			if l.draw == nil {
				l.draw = &draw{state: queue.DrawScheduled, seed: main.draw.seed, sha: main.draw.sha}
			}
			c.drawPending = true
		}
		l.cfg = &c
		wrote++
	}
	return wrote, nil
}
