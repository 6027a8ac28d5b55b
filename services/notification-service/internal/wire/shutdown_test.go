package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// A replica stopped by its context (what SIGTERM does) with streams open,
// heartbeats every 20 ms keeping its writers and timers busy, ends every
// stream and leaves no goroutine behind: each stream's goroutines stop
// with the handler that owns them. It counts goroutines: not parallel.
func TestShutdownWithStreamsOpenLeavesNoGoroutine(t *testing.T) {
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	cfg := testConfig(t, exchange)
	cfg.Heartbeat = 20 * time.Millisecond
	q := newQueue(t)
	ver, err := auth.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	// What the test set up so far (a Redis client closed at cleanup)
	// is not the service's.
	before := goleak.IgnoreCurrent()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	web := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(url string) (int, string) {
		res, err := web.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	testenv.WaitFor(t, 30*time.Second, "the replica's /readyz", func() bool {
		code, _ := get("http://" + svc.OpsAddr() + "/readyz")
		return code == http.StatusOK
	})

	// Bare connections: the test's clients run no goroutine.
	const n = 5
	streams := make([]*bufio.Reader, n)
	for i := range n {
		tok, err := ver.Mint(fmt.Sprint("user-", i), "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("tcp", svc.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET /api/v1/queues/%s/events?access_token=%s HTTP/1.1\r\nHost: x\r\n\r\n", q, tok)
		r := bufio.NewReader(conn)
		res, err := http.ReadResponse(r, nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %v %v", i, res, err)
		}
		for _, want := range []string{"event: position", ": heartbeat"} {
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatalf("stream %d, waiting for %q: %v", i, want, err)
				}
				if strings.TrimSuffix(line, "\n") == want {
					break
				}
			}
		}
		streams[i] = r
	}
	if _, metrics := get("http://" + svc.OpsAddr() + "/metrics"); !strings.Contains(metrics, fmt.Sprintf("\nwaitingroom_sse_streams_open %d\n", n)) {
		t.Fatalf("waitingroom_sse_streams_open is not %d before the shutdown", n)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after its context ended: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s")
	}
	// The streams' goroutines were waited for before Run returned (a
	// heartbeat timer's callback may still be leaving: goleak's turn).
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	for _, fn := range []string{"httpapi.(*pool[...]).work(", "httpapi.(*watcher).poll(", "httpapi.readUntilGone(", "httpapi.(*conn).finish("} {
		if strings.Contains(string(stacks), fn) {
			t.Errorf("a goroutine in %s) after Run returned", fn)
		}
	}
	for i, r := range streams {
		if _, err := io.Copy(io.Discard, r); err != nil {
			t.Fatalf("stream %d after the shutdown: %v, want its end", i, err)
		}
	}
	// net/http's connection goroutines end a moment after the server
	// closed them, later on a busy machine.
	deadline := time.Now().Add(15 * time.Second)
	for goleak.Find(before) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t, before)
}
