package wire

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// An event stream is not cut by HTTP_READ_TIMEOUT or HTTP_WRITE_TIMEOUT:
// with both at 1 s, a stream held for 4.5 s keeps getting heartbeats and
// positions throughout and an admission published after 3 s.
func TestStreamOutlivesTheHTTPTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	cfg := testConfig(t, exchange)
	cfg.HTTP = config.HTTP{ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout, ShutdownTimeout: 5 * time.Second}
	cfg.Heartbeat, cfg.PositionEvery = 200*time.Millisecond, 500*time.Millisecond
	url := replica(t, cfg)
	q := newQueue(t)
	ver, _ := auth.NewVerifier(secret)
	tok, err := ver.Mint("ann", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	hold := 4*timeout + timeout/2
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/queues/"+q+"/events?access_token="+tok, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("open: %v %v", res, err)
	}
	defer res.Body.Close()
	opened := time.Now()

	var mu sync.Mutex
	frames := map[string][]time.Duration{} // "heartbeat", "position", "admitted": when, after the open
	type end struct {
		err   error
		after time.Duration
	}
	ended := make(chan end, 1)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			kind := ""
			switch line := sc.Text(); {
			case line == ": heartbeat":
				kind = "heartbeat"
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			default:
				continue
			}
			mu.Lock()
			frames[kind] = append(frames[kind], time.Since(opened))
			mu.Unlock()
		}
		ended <- end{sc.Err(), time.Since(opened)}
	}()

	time.Sleep(3*timeout + timeout/5)
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: exchange, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Publisher().Publish(context.Background(), issued(q, "ann", "tok-late", time.Now())); err != nil {
		t.Fatal(err)
	}

	// The stream ends when the client gives up, not before.
	if e := <-ended; e.err == nil || !strings.Contains(e.err.Error(), "context deadline exceeded") {
		t.Fatalf("the stream ended with %v after %v, want the client's own deadline at %v", e.err, e.after.Round(time.Millisecond), hold)
	}
	mu.Lock()
	defer mu.Unlock()
	late := func(kind string) int {
		n := 0
		for _, at := range frames[kind] {
			if at > 3*timeout {
				n++
			}
		}
		return n
	}
	// Heartbeats every 200 ms and positions every 500 ms for 4.5 s: about
	// 22 and 9; the bounds leave room for a slow machine (the position
	// round reads Redis and may lag under load: the heartbeats and the
	// admission after 3 s are what show the stream outlived the timeouts).
	if len(frames["heartbeat"]) < 10 || late("heartbeat") < 3 || len(frames["position"]) < 2 {
		t.Fatalf("heartbeats %d (%d after %v), positions %d (%d after %v); want at least 10 (3 late) and 2",
			len(frames["heartbeat"]), late("heartbeat"), 3*timeout, len(frames["position"]), late("position"), 3*timeout)
	}
	if len(frames["admitted"]) != 1 || late("admitted") != 1 {
		t.Fatalf("admitted events at %v, want one after %v", frames["admitted"], 3*timeout)
	}
	t.Logf("over %v with 1 s read/write timeouts: %d heartbeats, %d positions, admitted at %v",
		hold, len(frames["heartbeat"]), len(frames["position"]), frames["admitted"][0].Round(time.Millisecond))
}
