package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeStart stands in for Docker: it records the server it was asked for
// and whether the container was removed.
type fakeStart struct {
	mu      sync.Mutex
	started []string
	stopped int
	err     error
}

func (f *fakeStart) start(_ context.Context, srv server) (string, func(context.Context) error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, srv.image)
	stop := func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stopped++
		return nil
	}
	if f.err != nil {
		return "", stop, f.err
	}
	return "127.0.0.1:32768", stop, nil
}

func (f *fakeStart) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.started), f.stopped
}

// syncBuffer is a bytes.Buffer safe to read while realMain writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKeepsTheContainerUntilStdinEnds: the address is printed alone on one
// line, the container stays while stdin is open and is removed once it
// ends.
func TestKeepsTheContainerUntilStdinEnds(t *testing.T) {
	fake := &fakeStart{}
	stdinR, stdinW := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- realMain(context.Background(), []string{"redis"}, stdinR, &out, fake.start) }()

	deadline := time.Now().Add(5 * time.Second)
	for out.String() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := out.String(); got != "127.0.0.1:32768\n" {
		t.Fatalf("stdout = %q, want \"127.0.0.1:32768\\n\"", got)
	}
	select {
	case err := <-done:
		t.Fatalf("realMain returned while stdin was open: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if started, stopped := fake.counts(); started != 1 || stopped != 0 {
		t.Fatalf("started %d, stopped %d while stdin is open; want 1, 0", started, stopped)
	}

	_ = stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("realMain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("realMain still runs 5s after stdin ended")
	}
	if started, stopped := fake.counts(); started != 1 || stopped != 1 {
		t.Errorf("started %d, stopped %d; want 1, 1", started, stopped)
	}
	if fake.started[0] != "redis:7-alpine" {
		t.Errorf("image = %s, want redis:7-alpine", fake.started[0])
	}
}

// TestFailedStartPrintsNothingAndRemovesWhatItMade: an error reaches the
// caller, stdout stays empty (testenv would read it as an address), and a
// container created before the failure is removed.
func TestFailedStartPrintsNothingAndRemovesWhatItMade(t *testing.T) {
	fake := &fakeStart{err: errors.New("no Docker engine: none here")}
	var out syncBuffer
	err := realMain(context.Background(), []string{"postgres"}, strings.NewReader(""), &out, fake.start)
	if err == nil || !strings.Contains(err.Error(), "no Docker engine") {
		t.Fatalf("realMain = %v, want the start's error", err)
	}
	if out.String() != "" {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
	if started, stopped := fake.counts(); started != 1 || stopped != 1 {
		t.Errorf("started %d, stopped %d; want 1, 1", started, stopped)
	}
}

// TestArguments: one known server name, nothing else.
func TestArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"none", nil, "usage"},
		{"two", []string{"redis", "postgres"}, "usage"},
		{"unknown", []string{"mysql"}, `unknown server "mysql"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeStart{}
			err := realMain(context.Background(), tc.args, strings.NewReader(""), io.Discard, fake.start)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("realMain(%q) = %v, want an error containing %q", tc.args, err, tc.want)
			}
			if started, _ := fake.counts(); started != 0 {
				t.Errorf("started %d containers, want 0", started)
			}
		})
	}
}

// TestEveryServerHasAStrategy: each server testenv asks for is known, with
// an image, a port and a wait strategy.
func TestEveryServerHasAStrategy(t *testing.T) {
	for _, name := range []string{"redis", "postgres", "rabbitmq"} {
		srv, ok := servers[name]
		if !ok || srv.image == "" || srv.port == "" || srv.wait == nil {
			t.Errorf("servers[%q] = %+v, %v; want an image, a port and a wait strategy", name, srv, ok)
		}
	}
}
