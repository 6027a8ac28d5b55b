package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/waitingroom/waitingroom/pkg/events"
)

// brokerURL is the local RabbitMQ (AMQP_URL, default guest on 127.0.0.1);
// the test fails, saying how to start one, when it does not answer.
func brokerURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("RabbitMQ is not reachable at AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/): %v\n"+
			"Start it with `rabbitmq-server -detached` (then `rabbitmqctl await_startup`), or `make services-up` "+
			"from the repository root, or point AMQP_URL at one.", err)
	}
	_ = conn.Close()
	return url
}

// broker is one test's private corner of the real broker: its own topic
// exchange (so the waiting room's real events, which other tests publish,
// never reach it) and queue name, deleted at the end.
type broker struct {
	url, exchange, queue string
	conn                 *amqp.Connection
	pub                  *amqp.Channel // in confirm mode
}

func newBroker(t *testing.T) *broker {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	br := &broker{url: brokerURL(t), exchange: "waitingroom.events.example-" + id, queue: "example-test-" + id}
	var err error
	if br.conn, err = amqp.Dial(br.url); err != nil {
		t.Fatal(err)
	}
	if br.pub, err = br.conn.Channel(); err != nil {
		t.Fatal(err)
	}
	if err := br.pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	br.declareExchange(t)
	t.Cleanup(func() {
		if ch, err := br.conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(br.queue, false, false, false)
			_, _ = ch.QueueDelete(br.queue+".dead", false, false, false)
			_ = ch.ExchangeDelete(br.exchange, false, false)
		}
		_ = br.conn.Close()
	})
	return br
}

// declareExchange declares the test's exchange as pkg/broker declares
// waitingroom.events: durable topic, with an alternate exchange (here one
// that does not exist: what nobody binds is dropped).
func (br *broker) declareExchange(t *testing.T) {
	t.Helper()
	args := amqp.Table{"alternate-exchange": br.exchange + ".unrouted"}
	if err := br.pub.ExchangeDeclare(br.exchange, "topic", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
}

// event is m as the waiting room publishes it: its properties and the
// CloudEvents headers, a traceparent, message_id = event id.
func event(t *testing.T, m interface {
	proto.Message
	GetEventId() string
}) amqp.Publishing {
	t.Helper()
	body, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	typ := events.TypeName(m)
	return amqp.Publishing{
		DeliveryMode: amqp.Persistent, ContentType: "application/protobuf", Type: typ,
		MessageId: m.GetEventId(), Timestamp: time.Now(), Body: body,
		Headers: amqp.Table{
			"cloudEvents:id": m.GetEventId(), "cloudEvents:source": "/order-service", "cloudEvents:type": typ,
			"cloudEvents:specversion": "1.0", "cloudEvents:time": time.Now().UTC().Format(time.RFC3339Nano),
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		},
	}
}

// publish publishes p with key and waits for the broker's confirm.
func (br *broker) publish(t *testing.T, key string, p amqp.Publishing) {
	t.Helper()
	c, err := br.pub.PublishWithDeferredConfirmWithContext(t.Context(), br.exchange, key, false, false, p)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.WaitContext(t.Context()); !ok || err != nil {
		t.Fatalf("publish %s: confirmed %v, %v", key, ok, err)
	}
}

// inspect returns a queue's ready messages and consumers (a passive
// declare, on a channel of its own: a missing queue closes the channel).
func (br *broker) inspect(t *testing.T, queue string) (messages, consumers int, ok bool) {
	t.Helper()
	ch, err := br.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		return 0, 0, false
	}
	return q.Messages, q.Consumers, true
}

// waitConsumers waits until queue exists and has n consumers.
func (br *broker) waitConsumers(t *testing.T, queue string, n int) {
	t.Helper()
	waitFor(t, "queue "+queue+" to have consumers", func() bool {
		_, c, ok := br.inspect(t, queue)
		return ok && c == n
	})
}

// waitFor polls cond for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs c until the returned stop is called; stop returns Run's error
// and fails the test when Run does not return within 10 s.
func start(t *testing.T, c *Consumer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10 s of the stop")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func ts() *timestamppb.Timestamp { return timestamppb.Now() }
