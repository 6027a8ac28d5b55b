package stream

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

var errStoreDown = errors.New("store down")

// memPositions is an in-memory Positions: every user waits at position 1
// unless admitted; queue "missing" does not exist; down makes every read
// fail. It counts the reads.
type memPositions struct {
	mu       sync.Mutex
	admitted map[string]*queue.Token
	down     bool
	asked    int
}

func newMemPositions() *memPositions { return &memPositions{admitted: map[string]*queue.Token{}} }

func (p *memPositions) admit(user, tokenID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.admitted[user] = &queue.Token{Secret: "secret-" + tokenID, ID: tokenID, ActivateAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
}

func (p *memPositions) Position(_ context.Context, q, user string) (queue.Standing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	return p.standing(q, user)
}

func (p *memPositions) standing(q, user string) (queue.Standing, error) {
	switch {
	case p.down:
		return queue.Standing{}, errStoreDown
	case q == "missing":
		return queue.Standing{}, queue.ErrNotFound
	case p.admitted[user] != nil:
		return queue.Standing{QueueID: q, State: queue.Admitted, Token: p.admitted[user], ConfiguredRate: 10}, nil
	}
	return queue.Standing{QueueID: q, State: queue.Waiting, Position: 1, Total: 1, ConfiguredRate: 10}, nil
}

func (p *memPositions) PositionMany(_ context.Context, q string, users []string) (map[string]queue.Standing, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	out := map[string]queue.Standing{}
	for _, u := range users {
		st, err := p.standing(q, u)
		if err != nil {
			return nil, err
		}
		out[u] = st
	}
	return out, nil
}

// counts is a Recorder that counts by "kind/label".
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounts() *counts { return &counts{n: map[string]int{}} }

func (c *counts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
}

func (c *counts) Delivered(event string)            { c.add("delivered/" + event) }
func (c *counts) Lag(event string, _ time.Duration) { c.add("lag/" + event) }
func (c *counts) Dropped(reason string)             { c.add("dropped/" + reason) }
func (c *counts) Rejected(reason string)            { c.add("rejected/" + reason) }

func (c *counts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}
