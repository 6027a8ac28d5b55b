package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

// Listener records every delivery of a test's own queue.
type Listener struct {
	mu  sync.Mutex
	got []broker.Delivery
}

// Listen declares spec's queue (so nothing published from now on is parked
// as unrouted), then consumes it until the test ends, recording everything.
func Listen(t testing.TB, conn *broker.Conn, spec broker.QueueSpec) *Listener {
	t.Helper()
	dctx, dcancel := context.WithTimeout(context.Background(), 15*time.Second)
	err := conn.Declare(dctx, spec)
	dcancel()
	if err != nil {
		t.Fatalf("declare the test's queue %s: %v", spec.Name, err)
	}
	l := &Listener{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = conn.Consume(ctx, spec, func(_ context.Context, d broker.Delivery) broker.Result {
			l.mu.Lock()
			l.got = append(l.got, d)
			l.mu.Unlock()
			return broker.Ack
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// Of returns the deliveries whose AMQP type is typ, in arrival order.
func (l *Listener) Of(typ string) []broker.Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []broker.Delivery
	for _, d := range l.got {
		if d.Type == typ {
			out = append(out, d)
		}
	}
	return out
}

// Keyed returns the deliveries with routing key key, in arrival order.
func (l *Listener) Keyed(key string) []broker.Delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []broker.Delivery
	for _, d := range l.got {
		if d.RoutingKey == key {
			out = append(out, d)
		}
	}
	return out
}
