package httpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// serve runs h on 127.0.0.1:0 with these timeouts until the test ends.
func serve(t *testing.T, h http.Handler, timeouts config.HTTP) string {
	t.Helper()
	timeouts.ShutdownTimeout = time.Second
	srv, err := httpserver.New("127.0.0.1:0", h, discard, httpserver.Options{Timeouts: timeouts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv.Addr()
}

// engine is the API engine with a route that refuses without reading the
// body (as auth does) and one that decodes it.
func engine(t *testing.T, bodyErr chan<- error) http.Handler {
	t.Helper()
	e, err := httpserver.NewEngine(httpserver.EngineOptions{Service: "test", Log: discard, Registry: prometheus.NewRegistry(),
		Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	e.POST("/refuse", func(c *gin.Context) { c.Status(http.StatusUnauthorized) })
	e.POST("/read", func(c *gin.Context) {
		_, err := io.ReadAll(c.Request.Body)
		bodyErr <- err
		c.Status(http.StatusBadRequest)
	})
	return e
}

// trickle writes head, then one byte every interval until the connection
// fails; it returns how long after head the server closed the connection
// and the status line it answered. It stops waiting at giveUp.
func trickle(t *testing.T, addr, head string, interval, giveUp time.Duration) (time.Duration, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	_ = conn.SetReadDeadline(start.Add(giveUp))
	r := bufio.NewReader(conn)
	status, _ := r.ReadString('\n')
	_, err = io.Copy(io.Discard, r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open %v after the first byte (status line %q)", giveUp, strings.TrimSpace(status))
	}
	return time.Since(start), strings.TrimSpace(status)
}

func TestSlowClientsAreCutAtTheReadTimeout(t *testing.T) {
	t.Parallel()
	const read = 2 * time.Second
	timeouts := config.HTTP{ReadTimeout: read, WriteTimeout: 2 * read, IdleTimeout: time.Minute}
	post := func(path string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{"
	}
	tests := []struct {
		name, head, status string
		bodyRead           bool
	}{
		// A handler that refuses without reading: the server reads the rest
		// of the body after it, under the same deadline.
		{"body never read by the handler", post("/refuse"), "HTTP/1.1 401 Unauthorized", false},
		// A handler that reads: its read fails at the deadline.
		{"body read by the handler", post("/read"), "HTTP/1.1 400 Bad Request", true},
		// Headers that never end get min(5s, read timeout): nothing is answered.
		{"headers never finished", "POST /refuse HTTP/1.1\r\nHost: t\r\nX-Slow: ", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bodyErr := make(chan error, 1)
			addr := serve(t, engine(t, bodyErr), timeouts)
			elapsed, status := trickle(t, addr, tc.head, 4*time.Second, read+5*time.Second)
			if elapsed < read-500*time.Millisecond || elapsed > read+time.Second {
				t.Errorf("closed after %v, want %v..%v", elapsed.Round(time.Millisecond), read-500*time.Millisecond, read+time.Second)
			}
			if status != tc.status {
				t.Errorf("status line %q, want %q", status, tc.status)
			}
			if tc.bodyRead {
				select {
				case err := <-bodyErr:
					if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
						t.Errorf("the handler's body read ended with %v, want a timeout", err)
					}
				default:
					t.Error("the handler's body read had not ended when the connection closed")
				}
			}
		})
	}
}

// A response that writes a frame at a time, each under its own write
// deadline (as the event stream does), outlives both server timeouts; a
// plain response that takes longer than the write timeout is cut.
func TestPerWriteDeadlinesOutliveTheServerTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range 20 {
			_ = rc.SetWriteDeadline(time.Now().Add(timeout))
			if _, err := fmt.Fprintf(w, "frame %d\n", i); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * timeout)
		_, _ = io.WriteString(w, "late\n")
	})
	addr := serve(t, mux, config.HTTP{ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout})

	start := time.Now()
	res, err := http.Get("http://" + addr + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	frames := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		frames++
	}
	if took := time.Since(start); frames != 20 || took < 3*timeout {
		t.Fatalf("%d frames over %v, want all 20 over more than %v (err %v)", frames, took.Round(time.Millisecond), 3*timeout, sc.Err())
	}

	res, err = http.Get("http://" + addr + "/slow")
	if err == nil {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("a response written after the write timeout arrived: %d %q", res.StatusCode, b)
	}
}

func TestHeaderTimeoutIsAtMostFiveSeconds(t *testing.T) {
	t.Parallel()
	// With a 30 s read timeout, unfinished headers are still cut at 5 s.
	addr := serve(t, http.NotFoundHandler(), config.HTTP{ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute, IdleTimeout: time.Minute})
	elapsed, status := trickle(t, addr, "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: ", 2*time.Second, 12*time.Second)
	if elapsed < 4500*time.Millisecond || elapsed > 6*time.Second || status != "" {
		t.Fatalf("closed after %v with %q, want 4.5s..6s and no answer", elapsed.Round(time.Millisecond), status)
	}
}
