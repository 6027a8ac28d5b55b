package wire

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const secret = "notify-test-secret-0123456789abcdef-xyz"

// replica runs one notification-service; it is stopped at cleanup.
func replica(t testing.TB, cfg Config) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatalf("replica did not start: %v", err)
	}
	url := "http://" + svc.Addr()
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("replica exited with %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("replica did not stop within 15s")
		}
	})
	// Ready once its fan-out queue is bound.
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := http.Get(url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("replica not ready within 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testConfig(t testing.TB, exchange string) Config {
	cfg := Config{HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", MaxStreamsPerIP: 0, Heartbeat: 5 * time.Second, PositionEvery: time.Hour,
		Buffer: 32, WriteTimeout: 5 * time.Second, HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second}}
	cfg.JWTSecret = secret
	cfg.Redis.URL = testenv.RedisURL(t)
	cfg.AMQP.URL = testenv.AMQPURL(t)
	cfg.AMQP.Exchange = exchange
	return cfg
}

// sse is one browser's stream: admitted events collected.
type sse struct {
	mu       sync.Mutex
	admitted []string // "tokenId" of each admitted event
	at       []time.Time
}

func open(t testing.TB, ctx context.Context, url, q, user string, ver *auth.Verifier) (*sse, error) {
	tok, err := ver.Mint(user, "", time.Hour)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/queues/"+q+"/events?access_token="+tok, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != 200 {
		res.Body.Close()
		return nil, fmt.Errorf("stream for %s: %d", user, res.StatusCode)
	}
	s := &sse{}
	first := make(chan struct{})
	go func() {
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var name, data string
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = line[6:]
			case line == "" && name != "":
				if name == "admitted" {
					i := strings.Index(data, `"tokenId":"`)
					tid := data[i+11:]
					tid = tid[:strings.IndexByte(tid, '"')]
					s.mu.Lock()
					s.admitted = append(s.admitted, tid)
					s.at = append(s.at, time.Now())
					s.mu.Unlock()
				}
				once.Do(func() { close(first) })
				name, data = "", ""
			}
		}
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("stream for %s: no first event", user)
	}
	return s, nil
}

func (s *sse) tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.admitted...)
}

func newQueue(t testing.TB) string {
	store, _ := redisstore.NewStore(testenv.Redis(t))
	q := testenv.ID(t)
	if _, _, err := store.UpdateConfig(context.Background(), q, func(c queue.Config, _ bool) (queue.Config, error) { return c, nil }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Purge(context.Background(), q) })
	return q
}

// publish sends events to cfg's exchange and waits for the broker's
// confirms.
func publish(t testing.TB, cfg Config, events []broker.Event) {
	t.Helper()
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: cfg.AMQP.Exchange, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Publisher().Publish(ctx, events...); err != nil {
		t.Fatal(err)
	}
}

func issued(q, user, tid string, at time.Time) broker.Event {
	return broker.Event{ID: tid + ".issued", RoutingKey: events.RoutingKeyTokenIssued, Time: at, Message: &waitingroomv1.TokenIssued{
		EventId: tid + ".issued", OccurredAt: timestamppb.New(at), QueueId: q, UserId: user, TokenId: tid,
		ActivateAt: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(5 * time.Minute)),
	}}
}

func TestTwoReplicasEveryUserGetsExactlyTheirOwnAdmission(t *testing.T) {
	t.Parallel()
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	cfg := testConfig(t, exchange)
	urls := []string{replica(t, cfg), replica(t, cfg)}
	q := newQueue(t)
	ver, _ := auth.NewVerifier(secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const users = 200
	streams := openStreams(t, ctx, urls, q, users, ver)
	batch := make([]broker.Event, users)
	now := time.Now()
	for i := range users {
		batch[i] = issued(q, fmt.Sprintf("user-%03d", i), fmt.Sprintf("tok-%03d", i), now)
	}
	publish(t, cfg, batch)
	awaitAdmissions(t, streams)
	var lags []time.Duration
	for i, s := range streams {
		toks := s.tokens()
		if len(toks) != 1 || toks[0] != fmt.Sprintf("tok-%03d", i) {
			t.Errorf("user %d got admissions %v, want exactly [tok-%03d]", i, toks, i)
		}
		s.mu.Lock()
		lags = append(lags, s.at[0].Sub(now))
		s.mu.Unlock()
	}
	worst := time.Duration(0)
	for _, l := range lags {
		worst = max(worst, l)
	}
	t.Logf("200 users on 2 replicas: each got exactly its own admission; slowest %v after the publish", worst)
}

// A TokensIssued (the dispatcher's TOKEN_EVENTS=batch) reaches each of its
// people as their own admission, once, however often it is delivered and
// alongside a TokenIssued of one of them.
func TestABatchOfAdmissionsReachesEachPersonOnce(t *testing.T) {
	t.Parallel()
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	cfg := testConfig(t, exchange)
	url := replica(t, cfg)
	q := newQueue(t)
	ver, _ := auth.NewVerifier(secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const users = 100
	streams := openStreams(t, ctx, []string{url}, q, users, ver)
	now := time.Now()
	b := &waitingroomv1.TokensIssued{EventId: "tok-000.issued.batch", OccurredAt: timestamppb.New(now), QueueId: q}
	for i := range users {
		b.Tokens = append(b.Tokens, issued(q, fmt.Sprintf("user-%03d", i), fmt.Sprintf("tok-%03d", i), now).Message.(*waitingroomv1.TokenIssued))
	}
	batch := broker.Event{ID: b.EventId, RoutingKey: events.RoutingKeyTokensIssued, Time: now, Message: b}
	publish(t, cfg, []broker.Event{batch, issued(q, "user-000", "tok-000", now), batch})
	awaitAdmissions(t, streams)
	for i, s := range streams {
		if toks := s.tokens(); len(toks) != 1 || toks[0] != fmt.Sprintf("tok-%03d", i) {
			t.Errorf("user %d got admissions %v, want exactly [tok-%03d]", i, toks, i)
		}
	}
}

// openStreams opens the streams of users user-000... of q, one after the
// other on each of urls, and fails the test if any could not be.
func openStreams(t *testing.T, ctx context.Context, urls []string, q string, users int, ver *auth.Verifier) []*sse {
	t.Helper()
	streams := make([]*sse, users)
	errs := make([]error, users)
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() { streams[i], errs[i] = open(t, ctx, urls[i%len(urls)], q, fmt.Sprintf("user-%03d", i), ver) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	return streams
}

// awaitAdmissions waits up to 15 s for every stream's first admission,
// then 300 ms more for any duplicate or stray event.
func awaitAdmissions(t *testing.T, streams []*sse) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; i < len(streams); {
		if len(streams[i].tokens()) >= 1 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("user %d got no admission within 15s", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
}
