package httpapi

import (
	"maps"
	"slices"
	"sync"
)

// watcher notices clients leaving, and closes their streams. A connection
// with a descriptor is watched by epoll, which costs no goroutine a
// connection (watch_linux.go); any other is read by a goroutine of its own
// (readUntilGone).
//
// The watcher owns those goroutines, the epoll one and the readers: close
// stops watching, ends every stream still watched, and waits for them.
type watcher struct {
	mu     sync.Mutex
	conns  map[uint64]*conn // every connection watched, by its id
	next   uint64
	closed bool
	ep     epoll // the connections epoll watches, and its instance
	done   sync.WaitGroup
}

// add watches c; the stream closes when its client leaves. Once the
// watcher is closed, c's stream closes at once.
func (w *watcher) add(c *conn) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		c.gone()
		return
	}
	if w.conns == nil {
		w.conns = map[uint64]*conn{}
	}
	w.next++
	c.id = w.next
	w.conns[c.id] = c
	if !w.epollAdd(c) {
		// Counted under mu, so a close that comes next waits for it.
		w.done.Go(func() { readUntilGone(c) })
	}
	w.mu.Unlock()
}

// remove stops watching c, before its connection closes (which ends its
// reader, if it has one).
func (w *watcher) remove(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conns[c.id] != c {
		return
	}
	delete(w.conns, c.id)
	w.epollRemove(c)
}

// close stops the watcher: every stream it still watches is closed, with
// its connection, and close returns once the epoll goroutine and the
// readers have returned. add closes the stream of a connection it is given
// afterwards.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	conns := slices.Collect(maps.Values(w.conns))
	w.mu.Unlock()
	for _, c := range conns {
		// The hub tells an attached conn itself; Closed closes the
		// connection of one it has not been attached to yet.
		c.gone()
		c.Closed()
	}
	w.mu.Lock()
	w.ep.close() // none is left: ends the epoll goroutine, if any
	w.mu.Unlock()
	w.done.Wait()
}

// readUntilGone reads c's connection until the client leaves, or the
// connection is closed, for a connection epoll does not watch.
func readUntilGone(c *conn) {
	var b [64]byte
	for {
		if _, err := c.nc.Read(b[:]); err != nil {
			c.gone()
			return
		}
	}
}
