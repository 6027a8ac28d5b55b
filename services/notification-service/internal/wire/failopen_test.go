package wire

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// frames opens a stream and sends each frame's "event data" on the channel;
// it returns the status when the stream was refused.
func frames(t *testing.T, ctx context.Context, url, q, user string, ver *auth.Verifier) (<-chan string, int) {
	t.Helper()
	tok, err := ver.Mint(user, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/queues/"+q+"/events?access_token="+tok, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, res.StatusCode
	}
	out := make(chan string, 64)
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[7:]
			case strings.HasPrefix(line, "data: ") && name != "":
				select {
				case out <- name + " " + line[6:]:
				default:
				}
				name = ""
			}
		}
	}()
	return out, http.StatusOK
}

// waitFrame waits for a frame containing want.
func waitFrame(t *testing.T, c <-chan string, want string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case f := <-c:
			if strings.Contains(f, want) {
				return f
			}
		case <-deadline:
			t.Fatalf("no frame with %s within %v", want, within)
		}
	}
}

// TestStreamsOfAQueueThatFailsOpenSayBypassWhileRedisIsAway: with the
// streams' Redis (a private server) killed, an open stream of a queue that
// fails OPEN gets a position event with state BYPASS, and a new stream on
// it opens with one, from the configurations kept in memory; a queue that
// fails CLOSED gets no BYPASS and a new stream on it is refused 503. With
// Redis back (and the queue entered again), the open stream's next position
// is the line.
func TestStreamsOfAQueueThatFailsOpenSayBypassWhileRedisIsAway(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedisServer(t)
	store := testenv.StoreAt(t, srv.URL())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open, closed := testenv.ID(t)+"-open", testenv.ID(t)+"-closed"
	setup := func() {
		for q, m := range map[string]queue.FailMode{open: queue.FailOpen, closed: queue.FailClosed} {
			if _, _, err := store.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
				c.FailMode = m
				return c, nil
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.Enter(ctx, q, "u1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	setup()
	cfg := testConfig(t, "test."+testenv.ID(t))
	cfg.Redis.URL, cfg.PositionEvery = srv.URL(), 300*time.Millisecond
	url := replica(t, cfg)
	ver, err := auth.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	openStream, st := frames(t, ctx, url, open, "u1", ver)
	closedStream, st2 := frames(t, ctx, url, closed, "u1", ver)
	if st != 200 || st2 != 200 {
		t.Fatalf("streams refused: %d %d", st, st2)
	}
	waitFrame(t, openStream, `"state":"WAITING"`, 3*time.Second)
	time.Sleep(1200 * time.Millisecond) // a cache refresh with both queues in it

	srv.Stop()
	// Once the replica's probe finds Redis down: a few failed refreshes in
	// a row (redisstore.OutageProbes over OutageWindow), 2 to 3 s.
	f := waitFrame(t, openStream, `"state":"BYPASS"`, 6*time.Second)
	if !strings.HasPrefix(f, "position ") || !strings.Contains(f, `"queueId":"`+open+`"`) {
		t.Errorf("bypass frame %q", f)
	}
	again, st := frames(t, ctx, url, open, "u2", ver)
	if st != http.StatusOK {
		t.Fatalf("a new stream on the OPEN queue with Redis down: %d, want 200", st)
	}
	waitFrame(t, again, `"state":"BYPASS"`, 2*time.Second)
	if _, st := frames(t, ctx, url, closed, "u2", ver); st != http.StatusServiceUnavailable {
		t.Errorf("a new stream on the CLOSED queue with Redis down: %d, want 503", st)
	}
	for drained := false; !drained; {
		select {
		case f := <-closedStream:
			if strings.Contains(f, "BYPASS") {
				t.Errorf("the CLOSED queue's stream got %q", f)
			}
		default:
			drained = true
		}
	}

	srv.Start()
	setup()
	waitFrame(t, openStream, `"state":"WAITING"`, 5*time.Second)
}
