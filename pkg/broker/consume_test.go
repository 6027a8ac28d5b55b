package broker_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

func TestConsumeResults(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.conn(e.url)
	pub := c.Publisher()
	const limit = 3
	name := e.queue("results")

	var mu sync.Mutex
	counts := map[string][]int64{} // DeliveryCount of every delivery, by message id
	probes := newRecorder(nil)
	var panicked bool
	h := func(ctx context.Context, d broker.Delivery) broker.Result {
		if isProbe(d.MessageID) {
			return probes.handle(ctx, d)
		}
		mu.Lock()
		counts[d.MessageID] = append(counts[d.MessageID], d.DeliveryCount)
		first := !panicked && d.MessageID == "panic"
		panicked = panicked || first
		mu.Unlock()
		switch d.MessageID {
		case "retry":
			return broker.Retry
		case "dead":
			return broker.DeadLetter
		case "panic":
			if first {
				panic("handler bug") // recovered, counts as Retry
			}
		}
		return broker.Ack
	}
	e.consume(c, broker.QueueSpec{Name: name, Bindings: []string{"res.#"}, Quorum: true, DeliveryLimit: limit, DeadLetter: true, Prefetch: 4}, h)
	e.warmUp(pub, "res.probe", probes)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	if err := pub.Publish(ctx, event("ack", "res.x", now), event("dead", "res.x", now), event("retry", "res.x", now), event("panic", "res.x", now)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "two messages in the DLQ and an empty queue", func() bool {
		return e.depth(name+".dlq") == 2 && e.depth(name) == 0
	})
	// The retried message was delivered once plus once per allowed return.
	waitFor(t, 10*time.Second, "every handler call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(counts["retry"]) >= limit+1 && len(counts["panic"]) == 2 && len(counts["ack"]) == 1
	})

	mu.Lock()
	got := map[string][]int64{}
	for k, v := range counts {
		got[k] = slices.Clone(v)
	}
	mu.Unlock()
	want := map[string][]int64{"ack": {0}, "dead": {0}, "retry": {0, 1, 2, 3}, "panic": {0, 1}}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("%s: delivery counts %v, want %v", id, got[id], w)
		}
	}

	// The DLQ holds exactly "dead" and "retry".
	var dlq []string
	reasons := map[string]any{}
	if err := e.do(func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(name+".dlq", true)
			if err != nil || !ok {
				return err
			}
			dlq = append(dlq, d.MessageId)
			if deaths, _ := d.Headers["x-death"].([]any); len(deaths) == 1 {
				death, _ := deaths[0].(amqp.Table)
				reasons[d.MessageId] = death["reason"]
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(dlq)
	if !slices.Equal(dlq, []string{"dead", "retry"}) {
		t.Errorf("DLQ holds %v, want [dead retry]", dlq)
	}
	if reasons["dead"] != "rejected" || reasons["retry"] != "delivery_limit" {
		t.Errorf("x-death reasons %v, want dead: rejected, retry: delivery_limit", reasons)
	}
	if d := e.depth(name); d != 0 {
		t.Errorf("queue depth %d after all settled, want 0", d)
	}
}

func TestConsumeFanOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.conn(e.url)
	pub := c.Publisher()
	a, b := newRecorder(nil), newRecorder(nil)
	e.consume(c, broker.QueueSpec{Bindings: []string{"fan.#"}}, a.handle)
	e.consume(c, broker.QueueSpec{Bindings: []string{"fan.#"}}, b.handle)
	e.warmUp(pub, "fan.probe", a, b)

	const n = 200
	var evs []broker.Event
	for _, id := range ids("fan", n) {
		evs = append(evs, event(id, "fan.ev", time.Now()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "both replicas to see every event", func() bool {
		ua, _, _ := a.counts()
		ub, _, _ := b.counts()
		return ua == n && ub == n
	})
	for name, r := range map[string]*recorder{"first": a, "second": b} {
		if unique, total, _ := r.counts(); unique != n || total != n {
			t.Errorf("%s consumer: %d distinct, %d deliveries; want %d each", name, unique, total, n)
		}
	}
}

func TestConsumeBadSpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.conn(e.url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack := func(context.Context, broker.Delivery) broker.Result { return broker.Ack }
	for name, spec := range map[string]broker.QueueSpec{
		"no bindings":          {Name: e.queue("nob")},
		"dead letter, no name": {Bindings: []string{"x"}, DeadLetter: true},
		"negative prefetch":    {Name: e.queue("np"), Bindings: []string{"x"}, Prefetch: -1},
	} {
		if err := c.Consume(ctx, spec, ack); err == nil {
			t.Errorf("%s: Consume = nil, want an error", name)
		}
	}
	// A spec that contradicts the existing queue is a bad spec too.
	q := e.queue("conflict")
	if err := e.do(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil) // classic
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := c.Consume(ctx, broker.QueueSpec{Name: q, Bindings: []string{"x"}, Quorum: true}, ack)
	var aerr *amqp.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp.PreconditionFailed {
		t.Errorf("Consume on a classic queue with Quorum = %v, want PRECONDITION_FAILED", err)
	}
	// The Conn is unharmed.
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy after a bad spec: %v", err)
	}
}

// TestAQueueForgetsStaleMessagesAndGoesWhenUnused: a queue with MessageTTL
// drops what waited longer (3 published with no consumer, none left after
// the TTL), keeps what is fresh (2 published then, 2 there), and with
// Expires it is deleted once it has had no consumer for that long. A
// negative TTL is a bad spec.
func TestAQueueForgetsStaleMessagesAndGoesWhenUnused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.conn(e.url)
	pub := c.Publisher()
	name := e.queue("stale")
	spec := broker.QueueSpec{Name: name, Bindings: []string{"stale.#"}, Quorum: true, MessageTTL: 2 * time.Second, Expires: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ack := func(context.Context, broker.Delivery) broker.Result { return broker.Ack }
	if err := c.Consume(ctx, broker.QueueSpec{Name: e.queue("bad"), Bindings: []string{"x"}, Quorum: true, MessageTTL: -time.Second}, ack); err == nil {
		t.Error("a negative MessageTTL was taken")
	}
	// Declare it (a consumer for a moment), then leave it without one.
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Consume(cctx, spec, ack) }()
	waitFor(t, 10*time.Second, "the queue declared", func() bool {
		return e.do(func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			return err
		}) == nil
	})
	ccancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := pub.Publish(ctx, event("s1", "stale.x", now), event("s2", "stale.x", now), event("s3", "stale.x", now)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the 3 stale messages dropped", func() bool { return e.depth(name) == 0 })
	if err := pub.Publish(ctx, event("f1", "stale.x", time.Now()), event("f2", "stale.x", time.Now())); err != nil {
		t.Fatal(err)
	}
	if n := e.depth(name); n != 2 {
		t.Errorf("fresh messages in the queue: %d, want 2", n)
	}
	waitFor(t, 30*time.Second, "the unused queue deleted", func() bool {
		err := e.do(func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			return err
		})
		var aerr *amqp.Error
		return errors.As(err, &aerr) && aerr.Code == amqp.NotFound
	})
}
