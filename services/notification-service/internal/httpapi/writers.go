package httpapi

import (
	"runtime"
	"sync"
	"time"
)

// writers write the frames of the streams that have some, on at most two
// goroutines a core (four at least): their writes do not wait for sockets
// (watch_linux.go), so a few are enough. A goroutine that finds
// nothing to do waits a moment for more before it ends: a burst of events
// does not start and end one for each, and an idle replica runs none. The
// zero value is ready.
type writers struct {
	mu      sync.Mutex
	queue   []*conn
	max     int // set at the first push
	running int
	idle    int           // running goroutines waiting, no wake-up sent to them
	wake    chan struct{} // a wake-up for each idle goroutine taken by push
}

// linger is how long a writer with nothing to do waits for more.
const linger = time.Second

func (w *writers) push(c *conn) {
	w.mu.Lock()
	w.queue = append(w.queue, c)
	if w.wake == nil {
		w.max = max(4, 2*runtime.GOMAXPROCS(0))
		w.wake = make(chan struct{}, w.max)
	}
	switch {
	case w.idle > 0:
		w.idle--
		w.mu.Unlock()
		w.wake <- struct{}{} // never blocks: at most one a goroutine
	case w.running < w.max:
		w.running++
		w.mu.Unlock()
		go w.work()
	default:
		w.mu.Unlock()
	}
}

func (w *writers) work() {
	t := time.NewTimer(linger)
	defer t.Stop()
	var buf []byte
	for {
		w.mu.Lock()
		for len(w.queue) > 0 {
			c := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			w.mu.Unlock()
			buf = c.run(buf)
			w.mu.Lock()
		}
		w.queue = nil
		w.idle++
		w.mu.Unlock()

		t.Reset(linger)
		select {
		case <-w.wake:
			continue
		case <-t.C:
		}
		w.mu.Lock()
		if w.idle > 0 { // no wake-up on its way to a waiting goroutine: end
			w.idle--
			w.running--
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		<-w.wake // one is on its way: take it, for it counted this goroutine
	}
}
