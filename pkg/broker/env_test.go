package broker_test

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

const testSource = "/broker-test"

// env is one test's slice of the shared RabbitMQ: its own exchange (and
// .dlx) and queues, deleted when the test ends, and a plain amqp091
// connection for setup and inspection.
type env struct {
	t        *testing.T
	url      string
	exchange string
	admin    *amqp.Connection
	logs     *logCounts

	mu     sync.Mutex
	queues []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	url := testenv.AMQPURL(t)
	admin, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("admin connection: %v", err)
	}
	e := &env{t: t, url: url, exchange: "test." + testenv.ID(t), admin: admin, logs: &logCounts{n: map[string]int{}}}
	t.Cleanup(func() {
		defer admin.Close()
		e.mu.Lock()
		qs := e.queues
		e.mu.Unlock()
		for _, q := range qs {
			e.try(func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
		}
		for _, q := range []string{e.exchange + broker.ParkedSuffix, e.exchange + broker.UnroutedSuffix} {
			e.try(func(ch *amqp.Channel) error { _, err := ch.QueueDelete(q, false, false, false); return err })
		}
		for _, x := range []string{e.exchange, e.exchange + ".dlx", e.exchange + broker.UnroutedSuffix} {
			e.try(func(ch *amqp.Channel) error { return ch.ExchangeDelete(x, false, false) })
		}
	})
	return e
}

// do runs f on a fresh admin channel (a failed operation closes its channel).
func (e *env) do(f func(ch *amqp.Channel) error) error {
	ch, err := e.admin.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return f(ch)
}

func (e *env) try(f func(ch *amqp.Channel) error) {
	if err := e.do(f); err != nil {
		e.t.Logf("cleanup: %v", err)
	}
}

// queue names a queue of this test; it and its DLQ are deleted at the end.
func (e *env) queue(suffix string) string {
	name := e.exchange + "." + suffix
	e.mu.Lock()
	e.queues = append(e.queues, name, name+".dlq")
	e.mu.Unlock()
	return name
}

// depth is the number of ready messages in a queue.
func (e *env) depth(name string) int {
	var n int
	if err := e.do(func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		n = q.Messages
		return err
	}); err != nil {
		e.t.Fatalf("inspect %s: %v", name, err)
	}
	return n
}

func (e *env) options() broker.Options {
	log := slog.New(&countingHandler{Handler: slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}), c: e.logs})
	return broker.Options{Exchange: e.exchange, Source: testSource, Log: log,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
}

// conn returns a connected Conn, closed when the test ends.
func (e *env) conn(url string) *broker.Conn {
	e.t.Helper()
	c, err := broker.New(url, e.options())
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		e.t.Fatalf("Ready: %v", err)
	}
	return c
}

// consume runs Consume until the test ends and checks it returned nil.
func (e *env) consume(c *broker.Conn, spec broker.QueueSpec, h func(context.Context, broker.Delivery) broker.Result) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Consume(ctx, spec, h) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("Consume returned %v, want nil", err)
			}
		case <-time.After(30 * time.Second):
			e.t.Errorf("Consume did not return 30s after its context ended")
		}
	})
}

// warmUp publishes probes until every recorder has seen one: only then is
// each consumer's queue declared and bound, so no real event is unroutable.
func (e *env) warmUp(p *broker.Publisher, key string, recs ...*recorder) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		ready := true
		for _, r := range recs {
			ready = ready && r.probeCount() > 0
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("consumers not subscribed after 30s")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := p.Publish(ctx, event("probe-"+itoa(i), key, time.Now()))
		cancel()
		if err != nil && !errors.Is(err, broker.ErrUnroutable) {
			e.t.Fatalf("publish probe: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func proxyURL(t *testing.T, raw, addr string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

func hostPort(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" {
		return u.Host + ":5672"
	}
	return u.Host
}

func event(id, key string, at time.Time) broker.Event {
	return broker.Event{ID: id, RoutingKey: key, Time: at, Message: wrapperspb.String(id)}
}

func isProbe(id string) bool { return strings.HasPrefix(id, "probe-") }

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
