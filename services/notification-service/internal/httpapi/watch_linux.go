package httpapi

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"syscall"
)

// watcher notices clients leaving: one epoll instance holds every
// taken-over connection, asked for the peer's close or reset only
// (EPOLLRDHUP, and HUP and ERR, which epoll always reports), never for
// data, so bytes a client sends do not end its stream. The epoll
// descriptor itself waits in Go's network poller, so no thread blocks on
// it; it and its goroutine exist while at least one connection is watched.
// A connection epoll cannot watch (no descriptor, an epoll error) is read
// by a goroutine of its own.
type watcher struct {
	mu    sync.Mutex
	ep    *os.File
	epfd  int // ep's descriptor (ep.Fd would make it blocking)
	conns map[uint64]*conn
	next  uint64
}

// add watches c; the stream closes when its client leaves.
func (w *watcher) add(c *conn) {
	if c.raw == nil {
		go readUntilGone(c)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ep == nil {
		if err := w.start(); err != nil {
			slog.Default().Warn("event streams: no epoll, a goroutine reads each connection", "err", err)
			go readUntilGone(c)
			return
		}
	}
	w.next++
	id := w.next
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	var err error
	if cerr := c.raw.Control(func(fd uintptr) { err = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		go readUntilGone(c) // which also ends the stream of a connection closed already
		return
	}
	c.id = id
	w.conns[id] = c
}

// remove stops watching c, before its connection closes.
func (w *watcher) remove(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.id == 0 {
		return
	}
	delete(w.conns, c.id)
	if len(w.conns) == 0 && w.ep != nil {
		_ = w.ep.Close() // ends poll
		w.ep = nil
	}
}

// start makes the epoll instance and its goroutine; w.mu is held.
func (w *watcher) start() error {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return err
	}
	ep := os.NewFile(uintptr(fd), "event-stream-watcher") // non-blocking: in the network poller
	raw, err := ep.SyscallConn()
	if err != nil {
		_ = ep.Close()
		return err
	}
	w.ep, w.epfd, w.conns = ep, fd, map[uint64]*conn{}
	go w.poll(raw)
	return nil
}

// poll closes the stream of every connection epoll reports, until the
// epoll instance is closed.
func (w *watcher) poll(ep syscall.RawConn) {
	events := make([]syscall.EpollEvent, 64)
	for {
		var n int
		var werr error
		err := ep.Read(func(fd uintptr) bool {
			n, werr = syscall.EpollWait(int(fd), events, 0)
			if errors.Is(werr, syscall.EINTR) {
				n, werr = 0, nil
			}
			return n > 0 || werr != nil // else wait until epoll has something
		})
		if werr != nil {
			slog.Default().Error("event streams: epoll failed, clients leaving are noticed at their next write", "err", werr)
			return
		}
		if err != nil { // closed: no connection left to watch
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			c := w.conns[id]
			w.mu.Unlock()
			if c != nil {
				c.gone()
			}
		}
	}
}

// writeNow writes as much of b as the socket takes without waiting
// (nothing, for a connection without a descriptor).
func (c *conn) writeNow(b []byte) (int, error) {
	if c.raw == nil {
		return 0, nil
	}
	n := 0
	var werr error
	err := c.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			switch {
			case errors.Is(err, syscall.EINTR):
			case errors.Is(err, syscall.EAGAIN):
				return true
			case err != nil:
				werr = err
				return true
			case m == 0:
				return true
			}
		}
		return true
	})
	if err != nil {
		return n, err
	}
	return n, werr
}
