package broker_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestCloseLeavesNoGoroutines is not parallel: it counts the goroutines of
// the whole test binary, which only holds still while no other test runs.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	e := newEnv(t)
	before := runtime.NumGoroutine()

	t.Run("connected, publishing and consuming", func(t *testing.T) {
		c, err := broker.New(e.url, e.options())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		pub := c.Publisher()
		rec := newRecorder(nil)
		consumed := make(chan error, 1)
		// Background: only Close can end this Consume.
		go func() {
			consumed <- c.Consume(context.Background(), broker.QueueSpec{Bindings: []string{"close.#"}}, rec.handle)
		}()
		e.warmUp(pub, "close.probe", rec)
		var evs []broker.Event
		for _, id := range ids("close", 100) {
			evs = append(evs, event(id, "close.ev", time.Now()))
		}
		if err := pub.Publish(ctx, evs...); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "100 events", func() bool { u, _, _ := rec.counts(); return u == 100 })

		closeWithin(t, c, 5*time.Second)
		select {
		case err := <-consumed:
			if err != nil {
				t.Errorf("Consume after Close returned %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Consume still running 5s after Close returned")
		}
		if err := pub.Publish(ctx, event("late", "close.ev", time.Now())); !errors.Is(err, broker.ErrClosed) {
			t.Errorf("Publish after Close = %v, want ErrClosed", err)
		}
		if err := c.Ready(ctx); !errors.Is(err, broker.ErrClosed) {
			t.Errorf("Ready after Close = %v, want ErrClosed", err)
		}
		if err := c.Consume(ctx, broker.QueueSpec{Bindings: []string{"x"}}, rec.handle); !errors.Is(err, broker.ErrClosed) {
			t.Errorf("Consume after Close = %v, want ErrClosed", err)
		}
		if c.Healthy() == nil {
			t.Errorf("Healthy after Close = nil")
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})

	t.Run("never connected", func(t *testing.T) {
		url := fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", testenv.FreePort(t))
		failed := e.logs.get("broker: connect failed")
		c, err := broker.New(url, e.options())
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "two failed attempts", func() bool { return e.logs.get("broker: connect failed") >= failed+2 })
		if c.Healthy() == nil {
			t.Errorf("Healthy() = nil with nothing listening")
		}
		// A Publish waiting for the connection is released by Close.
		published := make(chan error, 1)
		go func() { published <- c.Publisher().Publish(context.Background(), event("x", "x", time.Now())) }()
		closeWithin(t, c, 5*time.Second)
		select {
		case err := <-published:
			if !errors.Is(err, broker.ErrClosed) {
				t.Errorf("waiting Publish returned %v at Close, want ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Publish still waiting 5s after Close")
		}
	})

	t.Run("while the line is cut", func(t *testing.T) {
		p := testenv.StartProxy(t, hostPort(t, e.url))
		c, err := broker.New(proxyURL(t, e.url, p.Addr()), e.options())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		p.Cut()
		waitFor(t, 10*time.Second, "Healthy() to see the cut", func() bool { return c.Healthy() != nil })
		closeWithin(t, c, 5*time.Second)
	})

	// Goroutines end a moment after the sockets close: wait, with a deadline.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, stacks)
	}
	if strings.Contains(stacks, "waitingroom/pkg/broker.") {
		t.Errorf("a broker goroutine outlived Close:\n%s", stacks)
	}
}

// closeWithin calls Close and fails, with every stack, if it hangs.
func closeWithin(t *testing.T, c *broker.Conn, limit time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
		t.Logf("Close took %v", time.Since(start).Round(time.Microsecond))
	case <-time.After(limit):
		buf := make([]byte, 1<<20)
		t.Fatalf("Close still running after %v:\n%s", limit, buf[:runtime.Stack(buf, true)])
	}
}
