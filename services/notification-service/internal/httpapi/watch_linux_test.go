package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// watched is one stream the watcher watches: the client's end and the
// server's conn.
type watched struct {
	client net.Conn
	c      *conn
}

// watchOne opens a connection on ln and a stream for user, and hands the
// server's end to s's watcher, hiding its descriptor when opaque (so a
// reader watches it, not epoll).
func watchOne(t *testing.T, s *streams, ln net.Listener, user string, opaque bool) watched {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if opaque {
		nc = struct{ net.Conn }{nc}
	}
	sub, err := s.svc.Subscribe(t.Context(), stream.Request{Queue: "q1", User: user, ClientIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(s, nc, sub)
	s.watch.add(c)
	sub.Attach(c)
	return watched{client: client, c: c}
}

// watching is the watcher's bookkeeping: connections watched, of which in
// epoll, and whether the epoll instance is open.
func (w *watcher) watching() (conns, polled int, open bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.conns), w.ep.n, w.ep.f != nil
}

// ended fails the test unless the server closed the client's connection.
func ended(t *testing.T, client net.Conn, what string) {
	t.Helper()
	_ = client.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, client); err != nil {
		t.Fatalf("%s: %v, want the connection closed by the server", what, err)
	}
}

// The watcher's goroutines, the epoll one and a reader for each
// connection without a descriptor, notice clients leaving; close ends the
// streams still watched and returns once its goroutines have returned, and
// a stream handed to it afterwards ends at once.
func TestWatcherCloseEndsItsGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	h := hub.New(8, 0)
	s := newStreams(stream.New(h, standings{}, slog.New(slog.DiscardHandler), nil, stream.Options{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 6
	streams := make([]watched, n)
	for i := range n {
		streams[i] = watchOne(t, s, ln, fmt.Sprint("u", i), i%2 == 1)
	}
	if conns, polled, open := s.watch.watching(); conns != n || polled != n/2 || !open {
		t.Fatalf("watching %d, %d in epoll (open %v); want %d, %d, open", conns, polled, open, n, n/2)
	}
	awaitIn(t, "httpapi.(*watcher).poll", 1)
	awaitIn(t, "httpapi.readUntilGone", n/2)

	// A client leaves from each kind: the epoll goroutine and a reader
	// end their streams.
	_ = streams[0].client.Close()
	_ = streams[1].client.Close()
	deadline := time.Now().Add(30 * time.Second)
	for h.Len() != n-2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open 30s after two clients left, want %d", h.Len(), n-2)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if conns, polled, open := s.watch.watching(); conns != n-2 || polled != n/2-1 || !open {
		t.Fatalf("after two left: watching %d, %d in epoll (open %v); want %d, %d, open", conns, polled, open, n-2, n/2-1)
	}

	within(t, 30*time.Second, "the watcher's close", s.watch.close)
	if h.Len() != 0 {
		t.Fatalf("%d streams open after the watcher closed, want 0", h.Len())
	}
	if conns, polled, open := s.watch.watching(); conns != 0 || polled != 0 || open {
		t.Fatalf("closed watcher: watching %d, %d in epoll (open %v); want none, closed", conns, polled, open)
	}
	for i := 2; i < n; i++ {
		ended(t, streams[i].client, fmt.Sprint("stream ", i, " after the watcher closed"))
	}
	if p, r := goroutinesIn("httpapi.(*watcher).poll"), goroutinesIn("httpapi.readUntilGone"); p != 0 || r != 0 {
		t.Fatalf("after close returned: %d epoll goroutines and %d readers, want none", p, r)
	}

	late := watchOne(t, s, ln, "late", false)
	if h.Len() != 0 || !late.c.closed {
		t.Fatalf("a stream handed to the closed watcher: %d open, conn closed %v; want it ended", h.Len(), late.c.closed)
	}
	ended(t, late.client, "the stream handed to the closed watcher")
	noneLeft(t, before) // within's goroutine, which ran close, ends a moment after it
}
