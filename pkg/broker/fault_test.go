package broker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// outage cuts the proxy, waits until c notices, holds the cut for about a
// second (and at least one failed reconnect), restores it and returns how
// long c took to be healthy again.
func outage(t *testing.T, e *env, p *testenv.Proxy, c *broker.Conn) time.Duration {
	t.Helper()
	failedBefore := e.logs.get("broker: connect failed")
	p.Cut()
	waitFor(t, 10*time.Second, "Healthy() to report the cut", func() bool { return c.Healthy() != nil })
	cutAt := time.Now()
	waitFor(t, 10*time.Second, "a failed reconnect while cut", func() bool {
		return e.logs.get("broker: connect failed") > failedBefore && time.Since(cutAt) >= time.Second
	})
	if err := c.Healthy(); err == nil {
		t.Fatalf("Healthy() = nil while the line is cut")
	}
	p.Restore()
	restoredAt := time.Now()
	waitFor(t, 30*time.Second, "Healthy() after Restore", func() bool { return c.Healthy() == nil })
	return time.Since(restoredAt)
}

func TestPublishSurvivesConnectionCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := testenv.StartProxy(t, hostPort(t, e.url))
	direct := e.conn(e.url)
	proxied := e.conn(proxyURL(t, e.url, proxy.Addr()))

	rec := newRecorder(nil)
	e.consume(direct, broker.QueueSpec{Name: e.queue("cut"), Bindings: []string{"cut.#"}, Quorum: true, Prefetch: 64}, rec.handle)
	e.warmUp(direct.Publisher(), "cut.probe", rec)

	const workers, perWorker, batch = 4, 500, 25
	const n = workers * perWorker
	pub := proxied.Publisher() // one Publisher shared by all workers
	var confirmed atomic.Int64
	var okCalls, failedCalls atomic.Int64
	var slowest atomic.Int64
	halfway := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := ids("cut-w"+itoa(w), perWorker)
			for i := 0; i < perWorker; i += batch {
				var b []broker.Event
				for _, id := range evs[i : i+batch] {
					b = append(b, event(id, "cut.ev", time.Now()))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				start := time.Now()
				err := pub.Publish(ctx, b...)
				cancel()
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d) // racy max, good enough for a log line
				}
				if err != nil {
					failedCalls.Add(1)
					t.Errorf("worker %d batch %d: Publish = %v, want nil", w, i/batch, err)
					continue
				}
				okCalls.Add(1)
				if confirmed.Add(batch) >= n*2/5 {
					once.Do(func() { close(halfway) })
				}
			}
		}()
	}

	<-halfway
	atCut := confirmed.Load()
	recovery := outage(t, e, proxy, proxied)
	wg.Wait()

	waitFor(t, 60*time.Second, "every event at the consumer", func() bool { u, _, _ := rec.counts(); return u >= n })
	unique, total, _ := rec.counts()
	t.Logf("%d events, %d confirmed before the cut, %d Publish calls; consumer: %d distinct, %d duplicates; "+
		"reconnected %v after Restore; slowest Publish %v; republish rounds %d",
		n, atCut, okCalls.Load(), unique, total-unique, recovery.Round(time.Millisecond),
		time.Duration(slowest.Load()).Round(time.Millisecond), e.logs.get("broker: publishing unconfirmed events again"))
	if lost := n - unique; lost != 0 || unique != n {
		t.Errorf("lost %d events (%d distinct of %d)", lost, unique, n)
	}
	if okCalls.Load() != n/batch || failedCalls.Load() != 0 {
		t.Errorf("%d Publish calls returned nil and %d failed; want %d and 0", okCalls.Load(), failedCalls.Load(), n/batch)
	}
	if lost, back := e.logs.get("broker: connection lost, reconnecting"), e.logs.get("broker: reconnected"); lost != 1 || back != 1 {
		t.Errorf("logged %d losses and %d reconnects, want 1 and 1", lost, back)
	}
}

func TestConsumeSurvivesConnectionCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	proxy := testenv.StartProxy(t, hostPort(t, e.url))
	direct := e.conn(e.url)
	proxied := e.conn(proxyURL(t, e.url, proxy.Addr()))
	pub := direct.Publisher()

	rec := newRecorder(nil)
	e.consume(proxied, broker.QueueSpec{Name: e.queue("consumer-cut"), Bindings: []string{"cc.#"}, Quorum: true}, rec.handle)
	e.warmUp(pub, "cc.probe", rec)

	publish := func(prefix string, n int) []string {
		t.Helper()
		var b []broker.Event
		list := ids(prefix, n)
		for _, id := range list {
			b = append(b, event(id, "cc.ev", time.Now()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := pub.Publish(ctx, b...); err != nil {
			t.Fatalf("Publish %s: %v", prefix, err)
		}
		return list
	}
	seenAll := func(list []string) func() bool {
		return func() bool {
			for _, id := range list {
				if rec.seen(id) == 0 {
					return false
				}
			}
			return true
		}
	}

	before := publish("before", 50)
	waitFor(t, 30*time.Second, "events before the cut", seenAll(before))

	recovery := outage(t, e, proxy, proxied)

	after := publish("after", 100)
	waitFor(t, 30*time.Second, "events published after Restore", seenAll(after))
	afterTotal := 0
	for _, id := range after {
		afterTotal += rec.seen(id)
	}
	beforeTotal := 0
	for _, id := range before {
		beforeTotal += rec.seen(id)
	}
	unique, total, _ := rec.counts()
	t.Logf("consumer healthy %v after Restore; %d distinct, %d deliveries (%d before the cut for 50 events, %d after for 100)",
		recovery.Round(time.Millisecond), unique, total, beforeTotal, afterTotal)
	if unique != 150 || afterTotal != 100 {
		t.Errorf("%d distinct events and %d deliveries of the 100 after Restore, want 150 and 100", unique, afterTotal)
	}
	if got := e.logs.get("broker: consuming"); got != 2 {
		t.Errorf("subscribed %d times, want 2 (once, and once after the cut)", got)
	}
}

func TestPublishRecoversFromChannelError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pub := e.conn(e.url).Publisher()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.Publish(ctx, event("first", "nobody.home", time.Now())); err != nil {
		t.Fatalf("first Publish = %v, want nil (parked in the alternate exchange)", err)
	}
	// Deleting the exchange makes the broker close the publisher's channel
	// (404); the event is published again on a new channel, which declares
	// the exchange again.
	if err := e.do(func(ch *amqp.Channel) error { return ch.ExchangeDelete(e.exchange, false, false) }); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, event("second", "nobody.home", time.Now())); err != nil {
		t.Fatalf("Publish after the exchange was deleted = %v, want nil (republished, parked)", err)
	}
	if d := e.depth(e.exchange + broker.ParkedSuffix); d != 2 {
		t.Errorf("parked %d events, want 2", d)
	}
	if err := e.do(func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(e.exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}); err != nil {
		t.Errorf("exchange not declared again: %v", err)
	}
	if got := e.logs.get("broker: publishing unconfirmed events again"); got != 1 {
		t.Errorf("republished %d times, want 1", got)
	}
}
