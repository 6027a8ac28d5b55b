package main

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// calls records the handler's calls by event id; fail makes the first call
// for an id fail.
type calls struct {
	mu      sync.Mutex
	n       map[string]int
	types   map[string]string
	batches map[string]string // event id -> Event.Batch
	fail    map[string]bool
}

func newCalls(failFirst ...string) *calls {
	c := &calls{n: map[string]int{}, types: map[string]string{}, batches: map[string]string{}, fail: map[string]bool{}}
	for _, id := range failFirst {
		c.fail[id] = true
	}
	return c
}

func (c *calls) handle(_ context.Context, e Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[e.ID]++
	c.types[e.ID] = e.Type
	c.batches[e.ID] = e.Batch
	if e.TraceParent != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		return errors.New("no traceparent") // every test event carries one
	}
	if c.fail[e.ID] {
		delete(c.fail, e.ID)
		return errors.New("database busy")
	}
	return nil
}

func (c *calls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func newTestConsumer(t *testing.T, br *broker, h Handler, bindings ...string) *Consumer {
	t.Helper()
	cfg := Config{URL: br.url, Exchange: br.exchange, Queue: br.queue, Bindings: bindings, Prefetch: 10, Backoff: 50 * time.Millisecond}
	c, err := NewConsumer(cfg, NewMemory(1000), h, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConsumerHandlesEachEventOnce publishes real events to a private
// exchange: an OrderCreated, an OrderFailed whose first handling fails, the
// OrderCreated again (a duplicate), an OrderFailed body that cannot decode,
// an event type newer than the code, an OrderCreated without message_id
// (its body's event_id is used) and a TokenIssued the bindings do not
// match. Each event is handled exactly once, the duplicate and the unknown
// type are acked unhandled, the bad body ends in the dead-letter queue, and
// the queue is empty at the end.
func TestConsumerHandlesEachEventOnce(t *testing.T) {
	br := newBroker(t)
	rec := newCalls("o2.failed")
	c := newTestConsumer(t, br, rec.handle, "order.*")
	stop := start(t, c)
	br.waitConsumers(t, br.queue, 1)

	created := &v1.OrderCreated{EventId: "o1.created", OccurredAt: ts(), QueueId: "sale", UserId: "u1", OrderId: "o1", TokenId: "t1", ProductId: "sku-1", Quantity: 2}
	failed := &v1.OrderFailed{EventId: "o2.failed", OccurredAt: ts(), QueueId: "sale", UserId: "u2", OrderId: "o2", TokenId: "t2",
		Reason: v1.OrderFailureReason_ORDER_FAILURE_REASON_DATABASE_ERROR, Restorable: true, RemainingTtlMs: 1000}
	noID := event(t, &v1.OrderCreated{EventId: "o5.created", OccurredAt: ts(), QueueId: "sale", UserId: "u5", OrderId: "o5", TokenId: "t5", Quantity: 1})
	noID.MessageId = ""
	bad := event(t, failed)
	bad.MessageId, bad.Body = "o3.failed", []byte{0x40, 0xff} // a varint that never ends
	newer := event(t, created)
	newer.Type, newer.MessageId = "waitingroom.v1.OrderCancelled", "o4.cancelled"

	// Routed to nothing (order.* only): if it came, Handled would be 4.
	br.publish(t, "token.issued", event(t, &v1.TokenIssued{EventId: "t9.issued", OccurredAt: ts(), QueueId: "sale", UserId: "u9", TokenId: "t9"}))
	br.publish(t, "order.created", event(t, created))
	br.publish(t, "order.failed", event(t, failed))
	br.publish(t, "order.created", event(t, created))
	br.publish(t, "order.failed", bad)
	br.publish(t, "order.cancelled", newer)
	br.publish(t, "order.created", noID)

	s := &c.Stats
	waitFor(t, "every delivery settled", func() bool {
		return s.Handled.Load()+s.Duplicates.Load()+s.Ignored.Load()+s.Rejected.Load()+s.Retried.Load() >= 7
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantStats(t, s, 3, 1, 1, 1, 1, 1) // redelivered: the retried one
	// o2 ran twice: it failed once and was not remembered.
	if got, want := rec.snapshot(), map[string]int{"o1.created": 1, "o2.failed": 2, "o5.created": 1}; !maps.Equal(got, want) {
		t.Errorf("handler calls %v, want %v", got, want)
	}
	if rec.types["o1.created"] != "waitingroom.v1.OrderCreated" || rec.types["o2.failed"] != "waitingroom.v1.OrderFailed" {
		t.Errorf("handled types %v", rec.types)
	}
	if m, cons, ok := br.inspect(t, br.queue); !ok || m != 0 || cons != 0 {
		t.Errorf("queue after the stop: %d messages, %d consumers (exists %v), want empty and unconsumed", m, cons, ok)
	}
	waitFor(t, "the bad event in the dead-letter queue", func() bool { m, _, _ := br.inspect(t, br.queue+".dead"); return m == 1 })
	ch, err := br.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := ch.Get(br.queue+".dead", true)
	if err != nil || !ok || d.MessageId != "o3.failed" {
		t.Errorf("dead-letter queue holds %q (got %v, %v), want o3.failed", d.MessageId, ok, err)
	}
	if m, _, _ := br.inspect(t, br.queue+".dead"); m != 0 {
		t.Errorf("dead-letter queue: %d more messages, want none", m)
	}
}

// TestConsumerHandlesTokensIssued publishes admissions in both forms the
// admission-dispatcher has (TOKEN_EVENTS each and batch): a TokenIssued
// for t1; a TokensIssued of t1, t2, t3 whose t3 fails at first; the same
// tokens grouped differently, t2, t3, t4, as a relay that failed over
// republishes them; a TokensIssued with a token without an event id; and
// one without tokens. Every token is handled once, as a TokenIssued, by its
// own event id (t3 twice: its first handling failed), whichever message
// carried it; the batch with no id ends in the dead-letter queue.
func TestConsumerHandlesTokensIssued(t *testing.T) {
	br := newBroker(t)
	rec := newCalls("t3.issued")
	c := newTestConsumer(t, br, rec.handle, "token.issued", "tokens.issued")
	stop := start(t, c)
	br.waitConsumers(t, br.queue, 1)

	token := func(n int) *v1.TokenIssued {
		id := "t" + strconv.Itoa(n)
		return &v1.TokenIssued{EventId: id + ".issued", OccurredAt: ts(), QueueId: "sale", UserId: "u" + strconv.Itoa(n), TokenId: id,
			ActivateAt: ts(), ExpiresAt: ts(), Sequence: uint64(10 + n)}
	}
	batch := func(tokens ...*v1.TokenIssued) *v1.TokensIssued {
		m := &v1.TokensIssued{OccurredAt: ts(), QueueId: "sale", Tokens: tokens}
		if len(tokens) > 0 {
			m.EventId = tokens[0].GetEventId() + ".batch"
		}
		return m
	}
	noID := token(6)
	noID.EventId = ""
	empty := batch()
	empty.EventId = "empty.batch"

	br.publish(t, "token.issued", event(t, token(1)))
	br.publish(t, "tokens.issued", event(t, batch(token(1), token(2), token(3))))
	br.publish(t, "tokens.issued", event(t, batch(token(2), token(3), token(4))))
	br.publish(t, "tokens.issued", event(t, batch(token(5), noID)))
	br.publish(t, "tokens.issued", event(t, empty))

	s := &c.Stats
	// 5 deliveries and a redelivery: t1 handled; t1..t3 retried, then 1
	// handled and 2 duplicates; t2..t4 1 handled and 2 duplicates (or, if
	// it came before the redelivery, 2 and 1, and the redelivery 0 and 3);
	// one rejected, one ignored.
	waitFor(t, "every delivery settled", func() bool {
		return s.Handled.Load()+s.Duplicates.Load() >= 7 && s.Rejected.Load() == 1 && s.Ignored.Load() == 1
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantStats(t, s, 3, 4, 1, 1, 1, 1)
	// Nothing of the batch without an id was handled, not even its t5.
	if got, want := rec.snapshot(), map[string]int{"t1.issued": 1, "t2.issued": 1, "t3.issued": 2, "t4.issued": 1}; !maps.Equal(got, want) {
		t.Errorf("handler calls %v, want %v", got, want)
	}
	for id, typ := range rec.types {
		if typ != "waitingroom.v1.TokenIssued" {
			t.Errorf("%s handled as %q, want waitingroom.v1.TokenIssued", id, typ)
		}
	}
	// t1 came alone first; t4 only in the second grouping; t2 and t3 were
	// handled from whichever batch reached them first.
	if b := rec.batches; b["t1.issued"] != "" || b["t4.issued"] != "t2.issued.batch" ||
		(b["t2.issued"] != "t1.issued.batch" && b["t2.issued"] != "t2.issued.batch") || (b["t3.issued"] != "t1.issued.batch" && b["t3.issued"] != "t2.issued.batch") {
		t.Errorf("handled from batches %v", b)
	}
	if m, cons, ok := br.inspect(t, br.queue); !ok || m != 0 || cons != 0 {
		t.Errorf("queue after the stop: %d messages, %d consumers (exists %v), want empty and unconsumed", m, cons, ok)
	}
	waitFor(t, "the batch with no id in the dead-letter queue", func() bool { m, _, _ := br.inspect(t, br.queue+".dead"); return m == 1 })
	ch, err := br.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := ch.Get(br.queue+".dead", true)
	if err != nil || !ok || d.MessageId != "t5.issued.batch" {
		t.Errorf("dead-letter queue holds %q (got %v, %v), want t5.issued.batch", d.MessageId, ok, err)
	}
}

// TestConsumerReconnects cuts the consumer's TCP connection under it: it
// dials again, declares and subscribes again, and its store still knows
// the events handled before the cut.
func TestConsumerReconnects(t *testing.T) {
	br := newBroker(t)
	rec := newCalls()
	c := newTestConsumer(t, br, rec.handle, "order.created")
	var mu sync.Mutex
	var conns []net.Conn
	c.dial = func(network, addr string) (net.Conn, error) {
		conn, err := amqp.DefaultDial(5*time.Second)(network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
		return conn, err
	}
	dials := func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
	stop := start(t, c)
	br.waitConsumers(t, br.queue, 1)

	first := &v1.OrderCreated{EventId: "o1.created", OccurredAt: ts(), QueueId: "sale", UserId: "u1", OrderId: "o1", Quantity: 1}
	br.publish(t, "order.created", event(t, first))
	waitFor(t, "o1 handled", func() bool { return c.Stats.Handled.Load() == 1 })

	mu.Lock()
	_ = conns[0].Close() // the network goes away
	mu.Unlock()
	waitFor(t, "a second connection, subscribed", func() bool {
		_, cons, ok := br.inspect(t, br.queue)
		return dials() == 2 && ok && cons == 1
	})
	br.publish(t, "order.created", event(t, &v1.OrderCreated{EventId: "o2.created", OccurredAt: ts(), QueueId: "sale", UserId: "u2", OrderId: "o2", Quantity: 1}))
	br.publish(t, "order.created", event(t, first)) // republished: a duplicate
	// Every duplicate is the republished o1, or o1 redelivered because its
	// ack was lost with the connection.
	waitFor(t, "o2 handled and the republished o1 seen", func() bool {
		return c.Stats.Handled.Load() == 2 && c.Stats.Duplicates.Load() == 1+c.Stats.Redelivered.Load()
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := rec.snapshot(), map[string]int{"o1.created": 1, "o2.created": 1}; !maps.Equal(got, want) {
		t.Errorf("handler calls %v, want %v", got, want)
	}
	if d, r := c.Stats.Duplicates.Load(), c.Stats.Redelivered.Load(); d != 1+r {
		t.Errorf("duplicates %d, redelivered %d: want duplicates = 1 + redelivered", d, r)
	}
	if n := dials(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	if m, cons, ok := br.inspect(t, br.queue); !ok || m != 0 || cons != 0 {
		t.Errorf("queue after the stop: %d messages, %d consumers (exists %v), want empty and unconsumed", m, cons, ok)
	}
}

// TestConsumerWaitsForTheExchange starts the consumer before the waiting
// room has declared its exchange: it retries, and consumes once the
// exchange is there.
func TestConsumerWaitsForTheExchange(t *testing.T) {
	br := newBroker(t)
	if err := br.pub.ExchangeDelete(br.exchange, false, false); err != nil {
		t.Fatal(err)
	}
	rec := newCalls()
	c := newTestConsumer(t, br, rec.handle, "order.created")
	var dials atomic.Int64
	c.dial = func(network, addr string) (net.Conn, error) {
		dials.Add(1)
		return amqp.DefaultDial(5*time.Second)(network, addr)
	}
	stop := start(t, c)
	waitFor(t, "a second attempt", func() bool { return dials.Load() >= 2 })
	if _, cons, ok := br.inspect(t, br.queue); ok || cons != 0 {
		t.Fatalf("queue exists (%v, %d consumers) before the exchange does: the consumer declared more than it checked", ok, cons)
	}
	br.declareExchange(t)
	br.waitConsumers(t, br.queue, 1)
	br.publish(t, "order.created", event(t, &v1.OrderCreated{EventId: "o1.created", OccurredAt: ts(), QueueId: "sale", UserId: "u1", OrderId: "o1", Quantity: 1}))
	waitFor(t, "o1 handled", func() bool { return c.Stats.Handled.Load() == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := rec.snapshot(), map[string]int{"o1.created": 1}; !maps.Equal(got, want) {
		t.Errorf("handler calls %v, want %v", got, want)
	}
}

// wantStats checks s's counts: handled, duplicates, ignored, rejected,
// retried and redelivered.
func wantStats(t *testing.T, s *Stats, handled, duplicates, ignored, rejected, retried, redelivered int64) {
	t.Helper()
	for _, n := range []struct {
		name      string
		got, want int64
	}{
		{"handled", s.Handled.Load(), handled},
		{"duplicates", s.Duplicates.Load(), duplicates},
		{"ignored", s.Ignored.Load(), ignored},
		{"rejected", s.Rejected.Load(), rejected},
		{"retried", s.Retried.Load(), retried},
		{"redelivered", s.Redelivered.Load(), redelivered},
	} {
		if n.got != n.want {
			t.Errorf("%s: %d, want %d", n.name, n.got, n.want)
		}
	}
}
