package httpapi

import (
	"errors"
	"log/slog"
	"os"
	"syscall"
)

// epoll holds every connection the watcher can reach the descriptor of,
// asked for the peer's close or reset only (EPOLLRDHUP, and HUP and ERR,
// which epoll always reports), never for data, so bytes a client sends do
// not end its stream. The epoll descriptor itself waits in Go's network
// poller, so no thread blocks on it; it and its goroutine (poll, counted
// in the watcher's) exist while at least one connection is in it.
type epoll struct {
	f  *os.File
	fd int // f's descriptor (f.Fd would make it blocking)
	n  int // connections in it
}

// epollAdd puts c in the epoll instance, making it first if there is none;
// false if c cannot be watched so (no descriptor, an epoll error), and a
// reader must watch it. w.mu is held.
func (w *watcher) epollAdd(c *conn) bool {
	if c.raw == nil {
		return false
	}
	if w.ep.f == nil {
		if err := w.epollStart(); err != nil {
			slog.Default().Warn("event streams: no epoll, a goroutine reads each connection", "err", err)
			return false
		}
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(uint32(c.id)), Pad: int32(uint32(c.id >> 32))}
	var err error
	if cerr := c.raw.Control(func(fd uintptr) { err = syscall.EpollCtl(w.ep.fd, syscall.EPOLL_CTL_ADD, int(fd), &ev) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		if w.ep.n == 0 {
			w.ep.close()
		}
		return false // a reader also ends the stream of a connection closed already
	}
	c.polled = true
	w.ep.n++
	return true
}

// epollRemove counts c out of the epoll instance, which its connection's
// close takes it out of, and closes the instance when c was the last one
// in it. w.mu is held.
func (w *watcher) epollRemove(c *conn) {
	if !c.polled {
		return
	}
	c.polled = false
	if w.ep.n--; w.ep.n == 0 {
		w.ep.close()
	}
}

// epollStart makes the epoll instance and starts its goroutine; w.mu is
// held.
func (w *watcher) epollStart() error {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return err
	}
	f := os.NewFile(uintptr(fd), "event-stream-watcher") // non-blocking: in the network poller
	raw, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return err
	}
	w.ep = epoll{f: f, fd: fd}
	// Counted under mu, so a close that comes next waits for it.
	w.done.Go(func() { w.poll(raw) })
	return nil
}

// close closes the epoll instance, if there is one, which ends its poll.
func (e *epoll) close() {
	if e.f != nil {
		_ = e.f.Close()
		*e = epoll{}
	}
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
		if err != nil { // closed: no connection left to watch, or the watcher closed
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
