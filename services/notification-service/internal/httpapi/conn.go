package httpapi

import (
	"bytes"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// conn is an event stream whose connection the handler took over from
// net/http. It has no goroutine of its own: the writers write its frames
// when the hub has messages for it or its heartbeat is due, the watcher
// notices the client leaving, and a timer marks the heartbeats. It is the
// stream's hub.Sink.
//
// The goroutines it starts outside the pools, a write finishing what the
// socket did not take at once and its heartbeat timer's callback, are
// counted in its streams' tasks, which Close waits for.
type conn struct {
	nc     net.Conn
	raw    syscall.RawConn // nc's descriptor, for writes that do not wait; nil if it has none
	sub    *stream.Subscription
	s      *streams
	id     uint64 // the watcher's; under its mu
	polled bool   // in the watcher's epoll instance; under its mu

	mu     sync.Mutex
	state  int  // idle, queued, writing or again
	beat   bool // a heartbeat is due
	closed bool
	timer  *time.Timer
}

// A conn's write state: idle (nothing to write), queued (waiting for a
// writer), writing (a writer, or the goroutine finishing a write the socket
// did not take at once, has it) and again (writing, and more came).
const (
	idle = iota
	queued
	writing
	again
)

func newConn(s *streams, nc net.Conn, sub *stream.Subscription) *conn {
	c := &conn{nc: nc, sub: sub, s: s}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	return c
}

// start hands the stream, its opening written, to the watcher and the
// heartbeat timer, and attaches it to the hub.
func (c *conn) start() {
	c.s.watch.add(c)
	c.mu.Lock()
	if !c.closed {
		c.s.tasks.Add(1) // the callback's, done when it ran or was stopped
		c.timer = time.AfterFunc(c.s.o.Heartbeat, c.heartbeat)
	}
	c.mu.Unlock()
	c.sub.Attach(c)
}

// Ready is hub.Sink's: messages wait on the stream.
func (c *conn) Ready() { c.schedule() }

// Closed is hub.Sink's: the stream was dropped or closed. The connection
// closes, which also ends a write waiting on it.
func (c *conn) Closed() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	if c.timer != nil && c.timer.Stop() {
		c.s.tasks.Done() // the callback will not run; one that runs sees closed
	}
	c.mu.Unlock()
	c.s.watch.remove(c)
	_ = c.nc.Close()
}

// gone: the client closed its end (the watcher saw it).
func (c *conn) gone() { c.sub.Close() }

// heartbeat marks a heartbeat due, every SSE_HEARTBEAT from the open, and
// hands c to the writers. It is the timer's callback, on a goroutine of
// its own, counted in tasks from when the timer was armed.
func (c *conn) heartbeat() {
	defer c.s.tasks.Done()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.beat = true
	c.s.tasks.Add(1) // the next callback's; this one's is still counted
	c.timer.Reset(c.s.o.Heartbeat)
	c.mu.Unlock()
	c.schedule()
}

// schedule hands c to the writers unless they have it already. Once they
// are closed they take nothing; by then every stream was closed.
func (c *conn) schedule() {
	c.mu.Lock()
	switch c.state {
	case idle:
		c.state = queued
		c.mu.Unlock()
		c.s.writers.push(c)
		return
	case writing:
		c.state = again
	}
	c.mu.Unlock()
}

// run is a writer's turn at c: what waits (live frames, a heartbeat) in
// one write that does not wait for the socket. What the socket does not
// take at once is finished by a goroutine of its own (counted in tasks),
// which waits for it up to the write timeout or until the connection
// closes, while the writer goes on to other streams. buf is the writer's
// scratch space, returned for its next turn.
func (c *conn) run(buf []byte) []byte {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return buf
	}
	beat := c.beat
	c.beat, c.state = false, writing
	c.mu.Unlock()
	msgs := c.sub.Take()
	buf = buf[:0]
	for _, m := range msgs {
		buf = appendFrame(buf, m)
	}
	if beat {
		buf = append(buf, heartbeat...)
	}
	if len(buf) == 0 {
		c.release()
		return buf
	}
	n, err := c.writeNow(buf)
	switch {
	case err != nil:
		c.fail()
	case n < len(buf):
		rest := bytes.Clone(buf[n:])
		c.s.tasks.Go(func() { c.finish(rest, msgs) })
	default:
		c.delivered(msgs)
		c.release()
	}
	return buf
}

// finish writes what the socket did not take at once.
func (c *conn) finish(rest []byte, msgs []hub.Message) {
	if _, err := c.writeWait(rest); err != nil {
		c.fail()
		return
	}
	c.delivered(msgs)
	c.release()
}

// release ends a write: c goes back to the writers if more came meanwhile.
func (c *conn) release() {
	c.mu.Lock()
	if c.state == again {
		c.state = queued
		c.mu.Unlock()
		c.s.writers.push(c)
		return
	}
	c.state = idle
	c.mu.Unlock()
}

// writeWait writes b, waiting for the socket up to the write timeout: a
// client whose socket takes nothing for that long is gone.
func (c *conn) writeWait(b []byte) (int, error) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.o.WriteTimeout))
	n, err := c.nc.Write(b)
	_ = c.nc.SetWriteDeadline(time.Time{})
	return n, err
}

func (c *conn) delivered(msgs []hub.Message) {
	for _, m := range msgs {
		c.sub.Delivered(m)
	}
}

// fail drops a stream whose socket did not take a write. It is counted
// unless the stream was closed first (its connection closed under the
// write).
func (c *conn) fail() {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if !closed {
		c.sub.WriteFailed()
	}
	c.sub.Close()
}
