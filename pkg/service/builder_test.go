package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func addr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) }

// TestBuilderServesAndDrainsReadinessFirst: Listen binds the API and ops
// listeners over one health; readiness reflects every check added; on the
// way out readiness fails before any other drain hook runs, and the
// resources close after the components, in reverse order.
func TestBuilderServesAndDrainsReadinessFirst(t *testing.T) {
	j := &journal{}
	b := NewBuilder("builder-test", quietLog())
	b.Group.Defer("first", func() error { j.add("closed first"); return nil })
	b.Group.Defer("second", func() error { j.add("closed second"); return nil })
	var failing atomic.Bool
	b.Check("dep", func(context.Context) error {
		if failing.Load() {
			return errors.New("dep down")
		}
		return nil
	})
	health := b.Health()
	// A hook added before Listen still runs after readiness fails.
	b.Group.OnDrain(func() {
		rec := httptest.NewRecorder()
		health.Readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		j.add(fmt.Sprintf("drain hook saw readyz %d", rec.Code))
	})
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("api")) })
	w, err := b.Listen(Listeners{API: api, APIAddr: addr(t), OpsAddr: addr(t), Timeouts: config.HTTP{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })

	if code, body, err := get("http://" + w.Addr() + "/"); err != nil || code != http.StatusOK || body != "api" {
		t.Fatalf("API: %d %q %v", code, body, err)
	}
	failing.Store(true)
	code, body, err := get("http://" + w.OpsAddr() + "/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "dep down") {
		t.Fatalf("readyz with the check failing: %d %q %v, want 503 naming dep", code, body, err)
	}
	failing.Store(false)
	// Readiness is cached for a second.
	deadline := time.Now().Add(5 * time.Second)
	for code, _, _ = get("http://" + w.OpsAddr() + "/readyz"); code != http.StatusOK; code, _, _ = get("http://" + w.OpsAddr() + "/readyz") {
		if time.Now().After(deadline) {
			t.Fatalf("readyz with the check passing again: %d, want 200", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"drain hook saw readyz 503", "closed second", "closed first"}
	if got := j.all(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("journal %q, want %q", got, want)
	}
	if _, err := net.Dial("tcp", w.Addr()); err == nil {
		t.Errorf("the API port %s still accepts connections after Run", w.Addr())
	}
}

// TestBuilderClosesWhatItOpenedWhenTheConstructorFails: a constructor that
// fails after binding its API port (the ops port is taken) returns the
// error, and CloseOnError frees the API port and closes the resources.
func TestBuilderClosesWhatItOpenedWhenTheConstructorFails(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	apiAddr := addr(t)
	closed := 0
	newService := func() (_ *Wired, err error) {
		b := NewBuilder("builder-test", quietLog())
		defer b.CloseOnError(&err)
		b.Group.Defer("connection", func() error { closed++; return nil })
		return b.Listen(Listeners{API: http.NotFoundHandler(), APIAddr: apiAddr, OpsAddr: taken.Addr().String()})
	}
	w, err := newService()
	if err == nil || w != nil || !strings.Contains(err.Error(), "builder-test") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("New = %v, %v; want no service and an error naming the service and the taken port", w, err)
	}
	if closed != 1 {
		t.Errorf("connection closed %d times, want 1", closed)
	}
	ln, err := net.Listen("tcp", apiAddr)
	if err != nil {
		t.Fatalf("the API port is still bound after the failed start: %v", err)
	}
	_ = ln.Close()
}

// TestBuilderConnectsAndChecksItsDependencies: Redis and RabbitMQ
// connections add their readiness checks (RabbitMQ only when required) and
// are closed by CloseOnError.
func TestBuilderConnectsAndChecksItsDependencies(t *testing.T) {
	for _, required := range []bool{true, false} {
		t.Run(fmt.Sprintf("broker required=%v", required), func(t *testing.T) {
			b := NewBuilder("builder-test", quietLog())
			rdb, store, err := b.Redis(context.Background(), config.Redis{URL: testenv.RedisURL(t)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Broker(config.AMQP{URL: testenv.AMQPURL(t), Exchange: "builder-test"}, required); err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for n := range b.checks {
				names[n] = true
			}
			if len(names) != 1+map[bool]int{true: 1}[required] || !names["redis"] || names["rabbitmq"] != required {
				t.Errorf("checks %v, want redis and, when required, rabbitmq", names)
			}
			if err := store.Ping(context.Background()); err != nil {
				t.Fatalf("redis ping: %v", err)
			}
			err = errors.New("a later step failed")
			b.CloseOnError(&err)
			if err := rdb.Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "closed") {
				t.Errorf("redis ping after CloseOnError: %v, want client closed", err)
			}
		})
	}
}

func TestBuilderRefusesACheckAfterHealth(t *testing.T) {
	b := NewBuilder("builder-test", quietLog())
	b.Health()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "late") {
			t.Errorf("recovered %v, want a panic naming the check", r)
		}
	}()
	b.Check("late", func(context.Context) error { return nil })
}
