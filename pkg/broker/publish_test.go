package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

func TestPublishDeliversEveryEventWithProperties(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.conn(e.url)
	pub := c.Publisher()

	const n, batch = 1000, 100
	base := time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)
	want := map[string]broker.Event{}
	var events []broker.Event
	for i, id := range ids("ev", n) {
		ev := event(id, "ev.created", base.Add(time.Duration(i)*time.Millisecond))
		want[id] = ev
		events = append(events, ev)
	}

	// Our consumer...
	rec := newRecorder(func(d broker.Delivery) error {
		if d.Redelivered || d.DeliveryCount != 0 {
			return fmt.Errorf("%s: redelivered=%v count=%d on a first delivery", d.MessageID, d.Redelivered, d.DeliveryCount)
		}
		return checkMessage(want[d.MessageID], d.RoutingKey, d.MessageID, d.Type, d.ContentType, d.Timestamp, d.Headers, d.Body)
	})
	e.consume(c, broker.QueueSpec{Name: e.queue("props"), Bindings: []string{"ev.#"}, Quorum: true, Prefetch: 64}, rec.handle)

	// ...and a plain amqp091 one, which also sees the delivery mode.
	raw := newRecorder(nil)
	var rawMu sync.Mutex
	var rawProblems []string
	rawCh, err := e.admin.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := rawCh.QueueDeclare("", false, true, true, false, nil)
	if err == nil {
		err = rawCh.QueueBind(q.Name, "ev.#", e.exchange, false, nil)
	}
	if err != nil {
		t.Fatalf("declare raw queue: %v", err)
	}
	msgs, err := rawCh.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	rawDone := make(chan struct{})
	go func() {
		defer close(rawDone)
		for d := range msgs {
			if isProbe(d.MessageId) {
				continue
			}
			err := checkMessage(want[d.MessageId], d.RoutingKey, d.MessageId, d.Type, d.ContentType, d.Timestamp, d.Headers, d.Body)
			if d.DeliveryMode != amqp.Persistent {
				err = errors.Join(err, fmt.Errorf("%s: delivery mode %d, want 2", d.MessageId, d.DeliveryMode))
			}
			if err != nil {
				rawMu.Lock()
				rawProblems = append(rawProblems, err.Error())
				rawMu.Unlock()
			}
			raw.handle(context.Background(), broker.Delivery{MessageID: d.MessageId})
		}
	}()
	t.Cleanup(func() { _ = rawCh.Close(); <-rawDone })

	e.warmUp(pub, "ev.probe", rec)
	start := time.Now()
	for i := 0; i < n; i += batch {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := pub.Publish(ctx, events[i:i+batch]...)
		cancel()
		if err != nil {
			t.Fatalf("Publish batch %d: %v", i/batch, err)
		}
	}
	took := time.Since(start)
	t.Logf("published and confirmed %d events in %v (%.0f/s)", n, took.Round(time.Millisecond), n/took.Seconds())

	waitFor(t, 60*time.Second, "both consumers to see every event", func() bool {
		u1, _, _ := rec.counts()
		u2, _, _ := raw.counts()
		return u1 == n && u2 == n
	})
	unique, total, problems := rec.counts()
	if unique != n || total != n || problems != 0 {
		t.Errorf("Consume: %d distinct, %d deliveries, %d with wrong properties; want %d, %d, 0: %v",
			unique, total, problems, n, n, rec.firstProblems())
	}
	unique, total, _ = raw.counts()
	rawMu.Lock()
	defer rawMu.Unlock()
	if unique != n || total != n || len(rawProblems) != 0 {
		t.Errorf("raw consumer: %d distinct, %d deliveries, %d with wrong properties; want %d, %d, 0: %.5q",
			unique, total, len(rawProblems), n, n, rawProblems)
	}
}

func TestPublishUnboundKeyIsParkedNotReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := e.conn(e.url).Publisher()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unrouted, parked := e.exchange+broker.UnroutedSuffix, e.exchange+broker.ParkedSuffix

	// Nobody bound "nobody.home": the alternate exchange parks the event, so
	// an outbox is never held up by a routing key nobody subscribes to.
	if err := pub.Publish(ctx, event("u-1", "nobody.home", time.Now())); err != nil {
		t.Fatalf("Publish to an unbound key = %v, want nil (parked)", err)
	}
	q := e.queue("routed")
	if err := e.do(func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			return err
		}
		return ch.QueueBind(q, "routed.#", e.exchange, false, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, event("r-1", "routed.a", time.Now()), event("u-2", "nobody.home", time.Now()), event("r-3", "routed.b", time.Now())); err != nil {
		t.Fatalf("mixed Publish = %v", err)
	}
	// Publish returned after the confirms: everything is enqueued already.
	if d := e.depth(q); d != 2 {
		t.Errorf("routed queue holds %d messages, want 2", d)
	}
	if d := e.depth(parked); d != 2 {
		t.Errorf("%s holds %d messages, want 2", parked, d)
	}

	// Without the alternate exchange an unbound key really is unroutable:
	// the mandatory flag makes the broker return it, and Publish says so.
	if err := e.do(func(ch *amqp.Channel) error { return ch.ExchangeDelete(unrouted, false, false) }); err != nil {
		t.Fatal(err)
	}
	err := pub.Publish(ctx, event("r-4", "routed.c", time.Now()), event("u-5", "nobody.home", time.Now()))
	if !errors.Is(err, broker.ErrUnroutable) || errors.Is(err, broker.ErrNacked) || !strings.Contains(err.Error(), "u-5") || strings.Contains(err.Error(), "r-4") {
		t.Fatalf("Publish without the alternate exchange = %v, want ErrUnroutable for u-5 only", err)
	}
	if got := len(unwrapAll(err)); got != 1 {
		t.Errorf("Publish joined %d errors, want 1", got)
	}
}

func TestPublishNacked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := e.conn(e.url).Publisher()
	q := e.queue("full")
	// A queue that holds one message and nacks the next ones.
	if err := e.do(func(ch *amqp.Channel) error {
		args := amqp.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"}
		if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
			return err
		}
		return ch.QueueBind(q, "full.x", e.exchange, false, nil)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := pub.Publish(ctx, event("n-1", "full.x", time.Now()), event("n-2", "full.x", time.Now()), event("n-3", "full.x", time.Now()))
	errs := unwrapAll(err)
	if !errors.Is(err, broker.ErrNacked) || len(errs) != 2 || strings.Contains(err.Error(), "n-1") {
		t.Fatalf("Publish into a full queue = %v, want 2 errors wrapping ErrNacked (n-2, n-3)", err)
	}
	if d := e.depth(q); d != 1 {
		t.Errorf("full queue holds %d messages, want 1", d)
	}
}

func TestPublishRejectsBadEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := e.conn(e.url).Publisher()
	ctx := context.Background()
	for name, ev := range map[string]broker.Event{
		"no id":      {RoutingKey: "x", Message: wrapperspb.String("x")},
		"no message": {ID: "x", RoutingKey: "x"},
	} {
		if err := pub.Publish(ctx, event("ok", "nobody.home", time.Now()), ev); err == nil || errors.Is(err, broker.ErrUnroutable) {
			t.Errorf("%s: Publish = %v, want a validation error before anything is sent", name, err)
		}
	}
	if err := pub.Publish(ctx); err != nil {
		t.Errorf("Publish of nothing = %v", err)
	}
}
