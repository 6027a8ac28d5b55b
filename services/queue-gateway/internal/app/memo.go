package app

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// memo answers reads from memory: per key, a value at most ttl old. A key
// not held fresh is read once however many ask at once (concurrent misses
// share one read); a failed read is not remembered. Past forgetAt keys,
// the stale ones are dropped when the next is stored.
type memo[V any] struct {
	ttl      time.Duration
	forgetAt int
	now      func() time.Time
	sf       singleflight.Group

	mu   sync.Mutex
	held map[string]memoEntry[V]
}

type memoEntry[V any] struct {
	v  V
	at time.Time
}

func newMemo[V any](ttl time.Duration, forgetAt int) *memo[V] {
	return &memo[V]{ttl: ttl, forgetAt: forgetAt, now: time.Now, held: map[string]memoEntry[V]{}}
}

// get is key's value, from memory while fresh, else from read.
func (m *memo[V]) get(key string, read func() (V, error)) (V, error) {
	if v, ok := m.fresh(key); ok {
		return v, nil
	}
	got, err, _ := m.sf.Do(key, func() (any, error) {
		if v, ok := m.fresh(key); ok {
			return v, nil
		}
		v, err := read()
		if err != nil {
			return nil, err
		}
		e := memoEntry[V]{v: v, at: m.now()}
		m.mu.Lock()
		if len(m.held) >= m.forgetAt {
			for k, old := range m.held {
				if e.at.Sub(old.at) >= m.ttl {
					delete(m.held, k)
				}
			}
		}
		m.held[key] = e
		m.mu.Unlock()
		return v, nil
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return got.(V), nil
}

func (m *memo[V]) fresh(key string) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.held[key]
	return e.v, ok && m.now().Sub(e.at) < m.ttl
}

// forget drops key's value: the next get reads it.
func (m *memo[V]) forget(key string) {
	m.mu.Lock()
	delete(m.held, key)
	m.mu.Unlock()
}
