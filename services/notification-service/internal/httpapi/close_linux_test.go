package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// client is one stream request on a bare connection, which runs no
// goroutine.
type client struct {
	conn net.Conn
	r    *bufio.Reader
}

// ask sends user's stream request for q1 on a fresh connection dialled
// with d.
func ask(t *testing.T, addr, token string, d *net.Dialer) *client {
	t.Helper()
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	fmt.Fprintf(conn, "GET /api/v1/queues/q1/events?access_token=%s HTTP/1.1\r\nHost: x\r\n\r\n", token)
	return &client{conn: conn, r: bufio.NewReaderSize(conn, 512)}
}

// head reads the answer's status line and headers.
func (c *client) head(t *testing.T) *http.Response {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// until reads lines until one is line.
func (c *client) until(t *testing.T, line string) {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatalf("waiting for %q: %v", line, err)
		}
		if strings.TrimSuffix(l, "\n") == line {
			return
		}
	}
}

// ends fails the test unless the server closes the connection.
func (c *client) ends(t *testing.T, what string) {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, c.r); err != nil {
		t.Fatalf("%s: %v, want the connection closed by the server", what, err)
	}
}

// Close, with no help from the hub, ends every stream the handler took
// over and returns once each goroutine serving them has returned: writers
// busy with heartbeats every 10 ms, a write stuck on a client that reads
// nothing (its timeout an hour away), the epoll goroutine, and an opener
// waiting for the store, whose client is told the replica is stopping. A
// stream asked for afterwards is refused with 503.
func TestHandlerCloseEndsEveryStreamAndItsGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	log := slog.New(slog.DiscardHandler)
	ver, err := auth.NewVerifier("close-test-secret-0123456789abcdef-xyz")
	if err != nil {
		t.Fatal(err)
	}
	token := func(user string) string {
		tok, err := ver.Mint(user, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	h := hub.New(64, 0)
	asked := make(chan string, 1)
	svc := stream.New(h, standings{slow: "slow", started: asked}, log, nil,
		stream.Options{Heartbeat: 10 * time.Millisecond, PositionEvery: time.Hour, WriteTimeout: time.Hour})
	api, err := New(Options{Service: svc, Verifier: ver, Log: log, Registry: prometheus.NewRegistry(), Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	addr := srv.Listener.Addr().String()

	const steady = 3
	var streams []*client
	for i := range steady {
		c := ask(t, addr, token(fmt.Sprint("u", i)), &net.Dialer{})
		if res := c.head(t); res.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d", i, res.StatusCode)
		}
		c.until(t, "event: position")
		c.until(t, ": heartbeat")
		streams = append(streams, c)
	}
	// A client whose socket takes little and that reads nothing after
	// the head: a flood of events leaves a write waiting on it.
	stuck := ask(t, addr, token("stuck"), &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		_ = c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return serr
	}})
	if res := stuck.head(t); res.StatusCode != http.StatusOK {
		t.Fatalf("stuck stream: %d", res.StatusCode)
	}
	streams = append(streams, stuck)
	deadline := time.Now().Add(30 * time.Second)
	for h.Len() != steady+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open after 30s, want %d", h.Len(), steady+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	big := strings.Repeat("x", 256<<10)
	for i := range 40 { // more than the sockets hold, fewer than the buffer of 64
		svc.Admitted("q1", "stuck", fmt.Sprint("tok-", i, big), time.Now(), time.Now(), time.Now())
	}
	for goroutinesIn("httpapi.(*conn).finish") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no write waiting on the stuck client after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An opening waiting for the store.
	slow := ask(t, addr, token("slow"), &net.Dialer{})
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow stream's standing was not asked for within 30s")
	}
	awaitIn(t, "httpapi.(*watcher).poll", 1)

	within(t, 30*time.Second, "Close", func() { _ = api.Close() })
	if h.Len() != 0 {
		t.Fatalf("%d streams open after Close, want 0", h.Len())
	}
	for _, fn := range []string{"httpapi.(*pool[...]).work", "httpapi.(*watcher).poll", "httpapi.readUntilGone", "httpapi.(*conn).finish"} {
		if n := goroutinesIn(fn); n != 0 {
			t.Errorf("%d goroutines in %s after Close returned, want 0", n, fn)
		}
	}
	for i, c := range streams {
		c.ends(t, fmt.Sprint("stream ", i, " after Close"))
	}
	if res := slow.head(t); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("the opening waiting at Close: %d, Retry-After %q; want 503, 1 (the replica is stopping)", res.StatusCode, res.Header.Get("Retry-After"))
	}
	late := ask(t, addr, token("late"), &net.Dialer{})
	if res := late.head(t); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("a stream asked for after Close: %d, Retry-After %q; want 503, 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	late.ends(t, "the refused stream")
	if h.Len() != 0 {
		t.Fatalf("%d streams open after the late request, want 0", h.Len())
	}

	srv.Close()
	noneLeft(t, before)
}
