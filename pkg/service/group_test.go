package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// journal records the order things happen in, from many goroutines.
type journal struct {
	mu    sync.Mutex
	steps []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.steps = append(j.steps, s)
	j.mu.Unlock()
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.steps)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// server is a component that runs until its context ends.
func server(j *journal, name string, err error) func(context.Context) error {
	return func(ctx context.Context) error {
		<-ctx.Done()
		j.add("stopped " + name)
		return err
	}
}

func TestGroupStopsInOrderAndReturnsEveryError(t *testing.T) {
	defer goleak.VerifyNone(t)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		// trigger stops the group: the caller's context, or a component.
		byCaller bool
		failing  func(context.Context) error
		want     []string // errors Run must name, in any order
	}{
		{name: "the caller stops it", byCaller: true, want: []string{"close conn: closing failed"}},
		{name: "a component fails", failing: func(context.Context) error { return boom }, want: []string{"relay: boom", "close conn: closing failed"}},
		{name: "a component returns early", failing: func(context.Context) error { return nil }, want: []string{"relay: stopped on its own", "close conn: closing failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &journal{}
			g := NewGroup(quietLog())
			g.Go("api", server(j, "api", nil))
			g.Go("ops", server(j, "ops", context.Canceled)) // its own end: no error
			g.Task("declare", func(context.Context) error { j.add("declared"); return nil })
			if tc.failing != nil {
				g.Go("relay", func(ctx context.Context) error {
					time.Sleep(20 * time.Millisecond)
					return tc.failing(ctx)
				})
			}
			g.OnDrain(func() { j.add("drain readiness") })
			g.OnDrain(func() { j.add("drain streams") })
			g.Defer("db", func() error { j.add("close db"); return nil })
			g.Defer("conn", func() error { j.add("close conn"); return errors.New("closing failed") })

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.byCaller {
				time.AfterFunc(20*time.Millisecond, cancel)
			}
			err := g.Run(ctx)
			if err == nil {
				t.Fatal("Run = nil, want the joined errors")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run = %q, want it to name %q", err, w)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.want) {
				t.Errorf("Run = %q: %d errors, want %d", err, n, len(tc.want))
			}
			steps := j.all()
			pos := func(s string) int {
				i := slices.Index(steps, s)
				if i < 0 {
					t.Fatalf("step %q missing from %v", s, steps)
				}
				return i
			}
			// Drain (in order) while everything runs, then the components
			// stop, then the resources close, connection before database.
			if !(pos("drain readiness") < pos("drain streams") &&
				pos("drain streams") < pos("stopped api") && pos("drain streams") < pos("stopped ops") &&
				pos("stopped api") < pos("close conn") && pos("stopped ops") < pos("close conn") &&
				pos("close conn") < pos("close db")) {
				t.Fatalf("steps %v out of order", steps)
			}
			if len(steps) != 7 {
				t.Fatalf("steps %v, want 7", steps)
			}
			// Close after Run does nothing more.
			if err := g.Close(); err != nil || len(j.all()) != 7 {
				t.Fatalf("second Close: %v, steps %v", err, j.all())
			}
		})
	}
}

func TestGroupTaskErrorStopsTheGroup(t *testing.T) {
	defer goleak.VerifyNone(t)
	j := &journal{}
	g := NewGroup(quietLog())
	g.Go("api", server(j, "api", nil))
	g.Task("declare", func(context.Context) error { return errors.New("no broker") })
	err := g.Run(context.Background())
	if err == nil || err.Error() != "declare: no broker" {
		t.Fatalf("Run = %v, want exactly the task's error", err)
	}
	if got := j.all(); !slices.Equal(got, []string{"stopped api"}) {
		t.Fatalf("steps %v, want the api stopped", got)
	}
}

func TestGroupCloseAfterAFailedStart(t *testing.T) {
	j := &journal{}
	g := NewGroup(quietLog())
	g.Defer("redis", func() error { j.add("close redis"); return nil })
	g.Defer("listener", func() error { j.add("close listener"); return nil })
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if got := j.all(); !slices.Equal(got, []string{"close listener", "close redis"}) {
		t.Fatalf("steps %v, want the listener then redis", got)
	}
}
