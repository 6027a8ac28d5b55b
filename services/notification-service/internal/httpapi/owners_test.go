package httpapi

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// This file's helpers serve the tests that each owner of goroutines
// (pool, watcher, Handler) stops and waits for all of them. Those tests
// count goroutines: none of them is parallel.

// goroutinesIn counts the goroutines running fn (a function name as a
// stack shows it) or something it called. A goroutine counted in a
// WaitGroup with Go has left fn when Wait returns, so an owner whose close
// waited has none in its functions.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		// A "created by" line names the creator, not what runs.
		for _, line := range strings.Split(g, "\n") {
			if strings.Contains(line, fn+"(") && !strings.HasPrefix(line, "created by ") {
				count++
				break
			}
		}
	}
	return count
}

// awaitIn waits for want goroutines to run fn: one just started may not
// have reached it yet.
func awaitIn(t *testing.T, fn string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for goroutinesIn(fn) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s after 30s, want %d", goroutinesIn(fn), fn, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noneLeft fails the test if a goroutine that goleak does not ignore in
// opts is still there after a generous while: net/http's connection
// goroutines and a finished timer callback end a moment after what closed
// them returned, later on a busy machine.
func noneLeft(t *testing.T, opts ...goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for goleak.Find(opts...) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t, opts...)
}

// within runs f and fails the test if it has not returned after d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// standings is a position store: every user waits at position 1, except
// the one called slow, whose read waits until its context ends (which
// started, if not nil, hears of).
type standings struct {
	slow    string
	started chan<- string
}

func (s standings) Position(ctx context.Context, q, user string) (queue.Standing, error) {
	if user == s.slow {
		if s.started != nil {
			s.started <- user
		}
		<-ctx.Done()
		return queue.Standing{}, ctx.Err()
	}
	return queue.Standing{QueueID: q, State: queue.Waiting, Position: 1, Total: 1, ConfiguredRate: 10}, nil
}

func (s standings) PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error) {
	out := map[string]queue.Standing{}
	for _, u := range users {
		st, err := s.Position(ctx, q, u)
		if err != nil {
			return nil, err
		}
		out[u] = st
	}
	return out, nil
}
