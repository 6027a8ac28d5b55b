package httpapi

import (
	"runtime"
	"sync"
	"time"
)

// runner is work a pool runs: an opening to subscribe and answer, a
// stream's frames to write. buf is scratch space, returned for the next.
type runner interface {
	run(buf []byte) []byte
}

// pool runs what is pushed on at most limit goroutines, started when work
// waits, so an idle replica runs none. A goroutine that finds nothing to
// do waits linger for more before it ends (0: it ends at once), so a burst
// does not start and end one for each. The openers and the writers are
// pools.
//
// The pool owns its goroutines: close stops them and waits for them.
type pool[T runner] struct {
	limit  func() int // read at the first push
	linger time.Duration

	mu      sync.Mutex
	queue   []T
	max     int
	running int
	idle    int           // running goroutines waiting, no wake-up sent to them
	wake    chan struct{} // a wake-up for each idle goroutine taken by push
	closed  bool          // push takes nothing, and a goroutine ends once the queue is empty
	done    sync.WaitGroup
}

// The two pools. maxOpeners is how many stream requests are subscribed at
// once: at least the store's connection pool, so that the store, as
// before, is what bounds how many standings are read at once. The writers'
// writes do not wait for sockets (watch_linux.go), so two a core (four at
// least) are enough, and one lingers a second for the next event.
const (
	maxOpeners = 64
	linger     = time.Second
)

func newOpeners() *pool[*opening] {
	return &pool[*opening]{limit: func() int { return maxOpeners }}
}

func newWriters() *pool[*conn] {
	return &pool[*conn]{limit: func() int { return max(4, 2*runtime.GOMAXPROCS(0)) }, linger: linger}
}

// push hands x to the pool's goroutines; false once the pool is closed, and
// then x does not run.
func (p *pool[T]) push(x T) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.queue = append(p.queue, x)
	if p.wake == nil {
		p.max = p.limit()
		p.wake = make(chan struct{}, p.max)
	}
	switch {
	case p.idle > 0:
		p.idle--
		p.mu.Unlock()
		p.wake <- struct{}{} // never blocks: at most one a goroutine
	case p.running < p.max:
		p.running++
		// Counted under mu, so a close that comes next waits for it.
		p.done.Go(p.work)
		p.mu.Unlock()
	default:
		p.mu.Unlock()
	}
	return true
}

// close stops the pool and returns once every goroutine of it has
// returned: what was pushed before still runs, a goroutine waiting for work
// ends at once instead of lingering, and push takes nothing more.
func (p *pool[T]) close() {
	p.mu.Lock()
	p.closed = true
	for ; p.idle > 0; p.idle-- {
		p.wake <- struct{}{} // never blocks, as in push
	}
	p.mu.Unlock()
	p.done.Wait()
}

func (p *pool[T]) work() {
	var t *time.Timer
	if p.linger > 0 {
		t = time.NewTimer(p.linger)
		defer t.Stop()
	}
	var buf []byte
	var none T
	for {
		p.mu.Lock()
		for len(p.queue) > 0 {
			x := p.queue[0]
			p.queue[0] = none
			p.queue = p.queue[1:]
			p.mu.Unlock()
			buf = x.run(buf)
			p.mu.Lock()
		}
		p.queue = nil
		if t == nil || p.closed {
			p.running--
			p.mu.Unlock()
			return
		}
		p.idle++
		p.mu.Unlock()

		t.Reset(p.linger)
		select {
		case <-p.wake:
			continue
		case <-t.C:
		}
		p.mu.Lock()
		if p.idle > 0 { // no wake-up on its way to a waiting goroutine: end
			p.idle--
			p.running--
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		<-p.wake // one is on its way: take it, for it counted this goroutine
	}
}
