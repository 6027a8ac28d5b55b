package wire

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// stack is a dispatcher (wired as in production) on real Redis and
// RabbitMQ, with its own exchange, order-failed queue and Redis queue.
type stack struct {
	t        *testing.T
	q        string
	cfg      Config
	store    *redisstore.Store
	amqpURL  string
	proxy    *testenv.Proxy
	conn     *broker.Conn // the test's own, direct connection
	listener *testenv.Listener
}

func newStack(t *testing.T, viaProxy bool, mut func(*queue.Config)) *stack {
	t.Helper()
	id := testenv.ID(t)
	s := &stack{t: t, q: id, amqpURL: testenv.AMQPURL(t)}
	rdb := testenv.Redis(t)
	var err error
	if s.store, err = redisstore.NewStore(rdb); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.store.UpdateConfig(context.Background(), s.q, func(c queue.Config, _ bool) (queue.Config, error) {
		if mut != nil {
			mut(&c)
		}
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.store.Purge(context.Background(), s.q) })

	s.cfg = Config{
		OpsAddr: "127.0.0.1:0", Tick: 100 * time.Millisecond, Lease: time.Second, Queues: []string{s.q},
		InstanceID: "disp-" + id, OrderFailed: config.OrderFailed{OrderFailedQueue: "test." + id + ".order-failed", OrderFailedDeliveryLimit: 20},
		HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second},
	}
	s.cfg.Redis.URL = testenv.RedisURL(t)
	s.cfg.AMQP.URL = s.amqpURL
	s.cfg.AMQP.Exchange = "test." + id
	if viaProxy {
		s.proxy = testenv.StartProxy(t, strings.TrimSuffix(strings.TrimPrefix(s.amqpURL, "amqp://guest:guest@"), "/"))
		s.cfg.AMQP.URL = "amqp://guest:guest@" + s.proxy.Addr() + "/"
	}
	t.Cleanup(s.deleteTopology)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if s.conn, err = broker.New(s.amqpURL, broker.Options{Exchange: s.cfg.AMQP.Exchange, Source: "/test", Log: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.conn.Close() })
	return s
}

// listen collects every token event on the exchange through a durable queue
// of the test's own (so nothing published while anyone reconnects is missed).
func (s *stack) listen() {
	s.listener = testenv.Listen(s.t, s.conn, broker.QueueSpec{Name: s.cfg.AMQP.Exchange + ".listener",
		Bindings: []string{"token.*", events.RoutingKeyTokensIssued}, Quorum: true})
}

// run starts the dispatcher; it is stopped (gracefully) at cleanup.
func (s *stack) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	svc, err := New(ctx, s.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		s.t.Fatalf("dispatcher did not start: %v", err)
	}
	go func() { done <- svc.Run(ctx) }()
	s.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				s.t.Errorf("dispatcher exited with %v", err)
			}
		case <-time.After(15 * time.Second):
			s.t.Error("dispatcher did not stop within 15s")
		}
	})
}

func (s *stack) deliveries(typ string) []broker.Delivery { return s.listener.Of(typ) }

func (s *stack) deleteTopology() {
	testenv.DeleteAMQPTopology(s.amqpURL, s.cfg.AMQP.Exchange,
		s.cfg.OrderFailedQueue, s.cfg.OrderFailedQueue+".dlq", s.cfg.AMQP.Exchange+".listener")
}

func (s *stack) fill(n int) {
	s.t.Helper()
	for i := range n {
		if _, err := s.store.Enter(context.Background(), s.q, userName(i)); err != nil {
			s.t.Fatal(err)
		}
	}
}

func userName(i int) string { return fmt.Sprintf("u%06d", i) }

func TestPublishedTokenIssuedDecodesAndCarriesCloudEventsHeaders(t *testing.T) {
	t.Parallel()
	s := newStack(t, false, func(c *queue.Config) { c.AdmissionRatePerSec = 100 })
	s.listen()
	s.fill(20)
	s.run()
	typ := events.TypeName(&waitingroomv1.TokenIssued{})
	testenv.WaitFor(t, 15*time.Second, "20 TokenIssued", func() bool { return len(s.deliveries(typ)) >= 20 })

	for _, d := range s.deliveries(typ) {
		var ev waitingroomv1.TokenIssued
		if err := proto.Unmarshal(d.Body, &ev); err != nil {
			t.Fatalf("body does not decode as %s: %v", typ, err)
		}
		want := map[string]string{
			"cloudEvents:id": d.MessageID, "cloudEvents:type": typ, "cloudEvents:specversion": "1.0",
			"cloudEvents:source": "/admission-dispatcher",
		}
		for k, v := range want {
			if got, _ := d.Headers[k].(string); got != v {
				t.Fatalf("header %s = %q, want %q", k, got, v)
			}
		}
		if tm, _ := d.Headers["cloudEvents:time"].(string); tm == "" {
			t.Fatal("no cloudEvents:time header")
		}
		if d.ContentType != "application/protobuf" || d.RoutingKey != events.RoutingKeyTokenIssued || d.MessageID != ev.GetEventId() {
			t.Fatalf("properties: content type %q key %q message id %q (event id %q)", d.ContentType, d.RoutingKey, d.MessageID, ev.GetEventId())
		}
		if ev.GetQueueId() != s.q || ev.GetTokenId() == "" || ev.GetSequence() == 0 || !ev.GetExpiresAt().AsTime().After(ev.GetActivateAt().AsTime()) {
			t.Fatalf("event fields: %v", &ev)
		}
		// The secret never leaves Redis: the body holds the id, not the token.
		st, err := s.store.Position(context.Background(), s.q, ev.GetUserId())
		if err != nil || st.Token == nil || st.Token.ID != ev.GetTokenId() || strings.Contains(string(d.Body), st.Token.Secret) {
			t.Fatalf("token of %s: %+v %v", ev.GetUserId(), st.Token, err)
		}
	}
}

// A broker cut for 2 s during admission loses no admission, with one
// message a person and with batches (TOKEN_EVENTS=batch).
func TestBrokerOutageLosesNoTokenIssued(t *testing.T) {
	t.Parallel()
	for _, form := range []string{TokenEventsEach, TokenEventsBatch} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			const users = 600
			s := newStack(t, true, func(c *queue.Config) { c.AdmissionRatePerSec = 200 })
			s.cfg.TokenEvents = form
			s.listen()
			s.fill(users)
			s.run()
			testenv.WaitFor(t, 15*time.Second, "admissions before the cut", func() bool { return len(s.admitted()) >= 100 })
			s.proxy.Cut()
			time.Sleep(2 * time.Second) // admissions go on into the outbox meanwhile
			s.proxy.Restore()
			cutAt := time.Now()
			testenv.WaitFor(t, 60*time.Second, "every admission published", func() bool {
				_, st, err := s.store.Config(context.Background(), s.q)
				return err == nil && st.IssuedTotal == users && len(uniqueTokens(s.admitted())) == users
			})
			all := s.admitted()
			t.Logf("%s: broker cut for 2 s during admission: %d issued, %d delivered, %d unique, lost 0, duplicates %d; all delivered %v after the restore",
				form, users, len(all), len(uniqueTokens(all)), len(all)-len(uniqueTokens(all)), time.Since(cutAt).Round(time.Millisecond))
			if n, _ := s.store.OutboxLen(context.Background(), s.q); n != 0 {
				t.Fatalf("outbox still holds %d events", n)
			}
		})
	}
}

// admitted is every admission delivered, a TokenIssued each: those
// delivered alone, then those of the TokensIssued delivered (one form is
// published at a time), in delivery order.
func (s *stack) admitted() []*waitingroomv1.TokenIssued {
	s.t.Helper()
	var out []*waitingroomv1.TokenIssued
	for _, d := range s.deliveries(events.TypeName(&waitingroomv1.TokenIssued{})) {
		var e waitingroomv1.TokenIssued
		if err := proto.Unmarshal(d.Body, &e); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, &e)
	}
	for _, d := range s.deliveries(events.TypeName(&waitingroomv1.TokensIssued{})) {
		var e waitingroomv1.TokensIssued
		if err := proto.Unmarshal(d.Body, &e); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, e.GetTokens()...)
	}
	return out
}

// With TOKEN_EVENTS=batch the admissions go out as TokensIssued only: each
// admitted person once, in the order of the line, many a message.
func TestBatchedAdmissionsArriveOnceInOrder(t *testing.T) {
	t.Parallel()
	const users = 300
	s := newStack(t, false, func(c *queue.Config) { c.AdmissionRatePerSec = 1000 })
	s.cfg.TokenEvents = TokenEventsBatch
	s.listen()
	s.fill(users)
	s.run()
	testenv.WaitFor(t, 15*time.Second, "300 admissions delivered", func() bool { return len(s.admitted()) >= users })
	time.Sleep(300 * time.Millisecond) // anything more would come now
	if n := len(s.deliveries(events.TypeName(&waitingroomv1.TokenIssued{}))); n != 0 {
		t.Fatalf("%d TokenIssued messages with TOKEN_EVENTS=batch, want 0", n)
	}
	batches := s.deliveries(events.TypeName(&waitingroomv1.TokensIssued{}))
	got := s.admitted()
	if len(got) != users || len(batches) == 0 || len(batches) > users/2 {
		t.Fatalf("%d admissions in %d messages, want %d in 1 to %d", len(got), len(batches), users, users/2)
	}
	for i, e := range got {
		if e.GetUserId() != userName(i) || e.GetSequence() != uint64(i+1) || e.GetEventId() != e.GetTokenId()+".issued" || e.GetQueueId() != s.q {
			t.Fatalf("admission %d: %v, want %s, sequence %d", i, e, userName(i), i+1)
		}
	}
	for _, d := range batches {
		var b waitingroomv1.TokensIssued
		if err := proto.Unmarshal(d.Body, &b); err != nil {
			t.Fatal(err)
		}
		first := b.GetTokens()[0]
		if d.RoutingKey != events.RoutingKeyTokensIssued || d.MessageID != first.GetEventId()+".batch" || b.GetEventId() != d.MessageID ||
			!b.GetOccurredAt().AsTime().Equal(first.GetOccurredAt().AsTime()) || b.GetQueueId() != s.q {
			t.Fatalf("batch %s (key %s): %v", d.MessageID, d.RoutingKey, &b)
		}
	}
}

func unique(ds []broker.Delivery) map[string]bool {
	m := map[string]bool{}
	for _, d := range ds {
		m[d.MessageID] = true
	}
	return m
}

func uniqueTokens(ts []*waitingroomv1.TokenIssued) map[string]bool {
	m := map[string]bool{}
	for _, e := range ts {
		m[e.GetEventId()] = true
	}
	return m
}

func TestOrderFailedDeliveredFiveTimesRestoresOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t, false, nil)
	s.listen()
	s.run()
	ctx := context.Background()
	k := redisstore.KeysFor(s.q)
	rdb := testenv.Redis(t)

	// Two users hold consumed tokens (orders in flight), as the order-service leaves them.
	consumed := map[string]queue.Consumed{}
	for _, u := range []string{"restorable", "sold-out"} {
		now := time.Now()
		tok := queue.Token{Secret: "sec-" + u, ID: "tid-" + u, ActivateAt: now, ExpiresAt: now.Add(time.Minute)}
		rdb.Set(ctx, k.Status(u), redisstore.TokenMarker(tok, 1), 3*time.Minute)
		c, err := s.store.Consume(ctx, s.q, u, "sec-"+u, "order-"+u, 30*time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		consumed[u] = c
	}
	// The order-service declares the dispatcher's queue before it publishes;
	// so does the test, or its events could be parked as unrouted.
	if err := s.conn.Declare(ctx, events.OrderFailedQueue(s.cfg.OrderFailedQueue, s.cfg.OrderFailedDeliveryLimit)); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := s.conn.Publisher().Publish(ctx, orderFailed(s.q, "restorable", "tid-restorable", "order-restorable", true)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.conn.Publisher().Publish(ctx, orderFailed(s.q, "sold-out", "tid-sold-out", "order-sold-out", false)); err != nil {
		t.Fatal(err)
	}
	restoredType := events.TypeName(&waitingroomv1.TokenRestored{})
	testenv.WaitFor(t, 30*time.Second, "the restore", func() bool {
		st, err := s.store.Position(ctx, s.q, "restorable")
		return err == nil && st.State == queue.Admitted && st.Token != nil && len(s.deliveries(restoredType)) >= 1
	})
	testenv.WaitFor(t, 10*time.Second, "the sold-out slot freed", func() bool {
		return rdb.ZScore(ctx, k.Active(), "sold-out").Err() != nil
	})
	time.Sleep(500 * time.Millisecond) // let any duplicate restore surface
	st, _ := s.store.Position(ctx, s.q, "restorable")
	if !st.Token.ExpiresAt.Equal(consumed["restorable"].ExpiresAt) {
		t.Fatalf("restored expiry %v, want the original %v", st.Token.ExpiresAt, consumed["restorable"].ExpiresAt)
	}
	// The marker holding it lives two minutes past that expiry.
	if pttl := rdb.PTTL(ctx, k.Status("restorable")).Val(); pttl < 170*time.Second || pttl > 3*time.Minute {
		t.Fatalf("restored marker TTL %v, want the remaining ~1 min + 2 min", pttl)
	}
	if n := len(unique(s.deliveries(restoredType))); n != 1 {
		t.Fatalf("%d distinct TokenRestored events, want 1", n)
	}
	var ev waitingroomv1.TokenRestored
	if err := proto.Unmarshal(s.deliveries(restoredType)[0].Body, &ev); err != nil || ev.GetTokenId() != "tid-restorable" || ev.GetRemainingTtlMs() < 50_000 {
		t.Fatalf("TokenRestored = %v %v", &ev, err)
	}
	if st, _ := s.store.Position(ctx, s.q, "sold-out"); st.State != queue.Expired || st.Token != nil {
		t.Fatalf("sold-out user: %+v, want EXPIRED without a token", st)
	}
}

func orderFailed(q, user, tid, oid string, restorable bool) broker.Event {
	reason := waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_DATABASE_ERROR
	if !restorable {
		reason = waitingroomv1.OrderFailureReason_ORDER_FAILURE_REASON_SOLD_OUT
	}
	now := time.Now()
	return broker.Event{
		ID: tid + ".failed." + oid, RoutingKey: events.RoutingKeyOrderFailed, Time: now,
		Message: &waitingroomv1.OrderFailed{
			EventId: tid + ".failed." + oid, OccurredAt: timestamppb.New(now), QueueId: q, UserId: user,
			TokenId: tid, OrderId: oid, Reason: reason, Restorable: restorable, RemainingTtlMs: 60_000,
		},
	}
}
