package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/wire"
)

const secret = "stream-test-secret-0123456789abcdef-xyz"

// positions is a fixed store: every user waits at position 1 unless admitted.
type positions struct {
	mu       sync.Mutex
	admitted map[string]*queue.Token
}

func (p *positions) Position(_ context.Context, q, user string) (queue.Standing, error) {
	if q == "missing" {
		return queue.Standing{}, queue.ErrNotFound
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.admitted[user]; t != nil {
		return queue.Standing{QueueID: q, State: queue.Admitted, Token: t, ConfiguredRate: 10}, nil
	}
	return queue.Standing{QueueID: q, State: queue.Waiting, Position: 1, Total: 1, ConfiguredRate: 10}, nil
}

func (p *positions) PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error) {
	out := map[string]queue.Standing{}
	for _, u := range users {
		out[u], _ = p.Position(ctx, q, u)
	}
	return out, nil
}

type server struct {
	url string
	svc *stream.Service
	hub *hub.Hub
	ver *auth.Verifier
	pos *positions
}

func newServer(t *testing.T, buffer, perIP int) *server {
	t.Helper()
	ver, err := auth.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	h := hub.New(buffer, perIP)
	pos := &positions{admitted: map[string]*queue.Token{}}
	svc := stream.New(h, pos, log, wire.NewMetrics(reg, h), stream.Options{Heartbeat: time.Second, PositionEvery: time.Hour, WriteTimeout: 2 * time.Second})
	api, err := httpapi.New(httpapi.Options{Service: svc, Verifier: ver, Log: log, Registry: reg, Health: httpserver.NewHealth(nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() { h.CloseAll(); srv.Close(); _ = api.Close() })
	return &server{url: srv.URL, svc: svc, hub: h, ver: ver, pos: pos}
}

func (s *server) token(t testing.TB, user string) string {
	tok, err := s.ver.Mint(user, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// event is one parsed SSE frame, with when it arrived.
type event struct {
	name, id, data string
	at             time.Time
}

// client reads a stream into a channel until the body ends.
func connect(ctx context.Context, url string, hdr ...string) (<-chan event, *http.Response, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		return nil, res, nil
	}
	ch := make(chan event, 64)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ev.at = time.Now()
					ch <- ev
				}
				ev = event{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return ch, res, nil
}

func TestUnauthenticatedForeignAndUnknownStreamsAreRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t, 8, 0)
	ctx := context.Background()
	base := s.url + "/api/v1/queues/q1/events"
	cases := []struct {
		name, url string
		hdr       []string
		status    int
	}{
		{"no token", base, nil, 401},
		{"bad token", base + "?access_token=nope", nil, 401},
		{"foreign user", base + "?access_token=" + s.token(t, "alice") + "&userId=bob", nil, 403},
		{"unknown queue", s.url + "/api/v1/queues/missing/events?access_token=" + s.token(t, "alice"), nil, 404},
		{"header auth works", base, []string{"Authorization", "Bearer " + s.token(t, "alice")}, 200},
	}
	for _, c := range cases {
		cctx, cancel := context.WithCancel(ctx)
		_, res, err := connect(cctx, c.url, c.hdr...)
		if err != nil || res.StatusCode != c.status {
			t.Errorf("%s: %v %v, want %d", c.name, res.StatusCode, err, c.status)
		}
		cancel()
	}
}

func TestPerIPStreamCap(t *testing.T) {
	t.Parallel()
	s := newServer(t, 8, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 3 {
		if _, res, err := connect(ctx, s.url+"/api/v1/queues/q1/events?access_token="+s.token(t, fmt.Sprint("u", i))); err != nil || res.StatusCode != 200 {
			t.Fatalf("stream %d: %v %v", i, res.StatusCode, err)
		}
	}
	_, res, err := connect(ctx, s.url+"/api/v1/queues/q1/events?access_token="+s.token(t, "u9"))
	if err != nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("4th stream from one address: %v %v, want 429 with Retry-After", res.StatusCode, err)
	}
}

func TestReconnectWithLastEventIDGetsTheMissedAdmission(t *testing.T) {
	t.Parallel()
	s := newServer(t, 8, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := s.url + "/api/v1/queues/q1/events?access_token=" + s.token(t, "carol")
	ch, _, err := connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.name != "position" {
		t.Fatalf("first event %q, want position", ev.name)
	}
	cancel() // the browser loses its connection...
	// ...and meanwhile carol is admitted (the event goes to no stream of hers).
	s.pos.mu.Lock()
	s.pos.admitted["carol"] = &queue.Token{Secret: "s", ID: "tok-carol", ActivateAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)}
	s.pos.mu.Unlock()
	s.svc.Admitted("q1", "carol", "tok-carol", time.Now(), time.Now().Add(time.Minute), time.Now())

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	ch, _, err = connect(ctx2, url, "Last-Event-ID", "some-earlier-id")
	if err != nil {
		t.Fatal(err)
	}
	ev := <-ch
	if ev.name != "admitted" || ev.id != "tok-carol" || !strings.Contains(ev.data, `"tokenId":"tok-carol"`) || strings.Contains(ev.data, `"s"`) {
		t.Fatalf("after reconnect: %+v, want the admission of tok-carol without the secret", ev)
	}
}

func TestSlowClientIsDroppedWithoutDelayingOthers(t *testing.T) {
	t.Parallel()
	s := newServer(t, 4, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The slow client sends its request and never reads; a small receive
	// buffer makes its socket fill quickly.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		_ = c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return serr
	}}
	slow, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "GET /api/v1/queues/q1/events?access_token=%s HTTP/1.1\r\nHost: x\r\n\r\n", s.token(t, "slow"))

	const fast = 20
	chans := make([]<-chan event, fast)
	for i := range fast {
		ch, res, err := connect(ctx, s.url+"/api/v1/queues/q1/events?access_token="+s.token(t, fmt.Sprint("fast", i)))
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("fast %d: %v", i, err)
		}
		<-ch // the initial position
		chans[i] = ch
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.hub.Len() != fast+1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	// Flood the slow client while admitting the fast ones.
	big := strings.Repeat("x", 4000)
	var lags []time.Duration
	var mu sync.Mutex
	sentAt := make([]time.Time, fast)
	var wg sync.WaitGroup
	for i := range fast {
		wg.Go(func() {
			for ev := range chans[i] {
				if ev.name == "admitted" {
					mu.Lock()
					lags = append(lags, ev.at.Sub(sentAt[i]))
					mu.Unlock()
					return
				}
			}
		})
	}
	flooded := 0
	for s.hub.Len() == fast+1 && flooded < 100_000 {
		s.svc.Admitted("q1", "slow", fmt.Sprint("tok-", flooded, big[:flooded%4000]), time.Now(), time.Now(), time.Now())
		flooded++
		if flooded%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	for i := range fast {
		mu.Lock()
		sentAt[i] = time.Now()
		at := sentAt[i]
		mu.Unlock()
		s.svc.Admitted("q1", fmt.Sprint("fast", i), fmt.Sprint("tok-fast", i), time.Now(), time.Now().Add(time.Minute), at)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("only %d of %d fast clients got their admission", len(lags), fast)
	}
	if s.hub.Len() != fast {
		t.Fatalf("%d streams open, want %d: the slow one dropped", s.hub.Len(), fast)
	}
	sort.Slice(lags, func(a, b int) bool { return lags[a] < lags[b] })
	t.Logf("slow client dropped after %d queued events; the %d others' admission lag: p50 %v, max %v", flooded, fast, lags[len(lags)/2], lags[len(lags)-1])
	if lags[len(lags)-1] > time.Second {
		t.Fatalf("a fast client waited %v", lags[len(lags)-1])
	}
}
