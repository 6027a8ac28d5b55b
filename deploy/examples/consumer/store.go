package main

import (
	"context"
	"sync"
)

// Store makes handling idempotent: delivery is at least once, so the same
// event (the same id) can arrive twice, after a redelivery or a republish.
type Store interface {
	// Once runs fn unless an event with this id was handled already, and
	// remembers id when fn succeeds. ran is false for a duplicate (fn did
	// not run) and when fn failed (then err says why, and id is not
	// remembered, so a redelivery tries again).
	Once(ctx context.Context, id string, fn func(context.Context) error) (ran bool, err error)
}

// Memory is a Store that remembers the last size ids in memory, forgetting
// the oldest first. It is enough for this example, not for production: it
// forgets everything at a restart, and a duplicate older than the last size
// events is handled again.
//
// A real consumer keeps the ids in its own database, in the transaction that
// does the handling, so that "handled" and "remembered" cannot part:
//
//	BEGIN;
//	INSERT INTO handled_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING;
//	-- 0 rows inserted: a duplicate; ROLLBACK and ack.
//	-- ... the handling's own writes ...
//	COMMIT; -- then ack
//
// with event_id the primary key (a unique key, not a lookup: two replicas
// handling the same event at once cannot both insert it).
type Memory struct {
	mu   sync.Mutex
	seen map[string]struct{}
	ring []string // ids in the order remembered; next is overwritten first
	next int
}

// NewMemory returns a Memory remembering up to size ids (at least one).
func NewMemory(size int) *Memory {
	return &Memory{seen: make(map[string]struct{}), ring: make([]string, 0, max(size, 1))}
}

// Once implements Store. It holds the store while fn runs, so two
// deliveries of one event never run fn at the same time (the database's
// unique key does that for a real store).
func (m *Memory) Once(ctx context.Context, id string, fn func(context.Context) error) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.seen[id]; dup {
		return false, nil
	}
	if err := fn(ctx); err != nil {
		return false, err
	}
	if len(m.ring) < cap(m.ring) {
		m.ring = append(m.ring, id)
	} else {
		delete(m.seen, m.ring[m.next])
		m.ring[m.next] = id
		m.next = (m.next + 1) % len(m.ring)
	}
	m.seen[id] = struct{}{}
	return true, nil
}
