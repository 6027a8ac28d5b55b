package stream

import (
	"errors"
	"sync"
	"time"
)

// errStoreDown is the store's error while it is down (streamtest's
// Store.SetDown), which is the fake of Positions the tests use.
var errStoreDown = errors.New("store down")

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
