package service

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRetry(t *testing.T) {
	retryMin, retryMax = time.Millisecond, 4*time.Millisecond
	t.Cleanup(func() { retryMin, retryMax = 200*time.Millisecond, 5*time.Second })
	transient, permanent := errors.New("not up yet"), errors.New("wrong password")
	onlyTransient := func(err error) bool { return errors.Is(err, transient) }
	cases := []struct {
		name      string
		failures  []error // op's answers before it succeeds
		within    time.Duration
		retryable func(error) bool
		cancel    bool
		wantCalls int
		wantErr   error
	}{
		{name: "succeeds at once", wantCalls: 1},
		{name: "succeeds after three transient failures", failures: []error{transient, transient, transient}, retryable: onlyTransient, wantCalls: 4},
		{name: "nil retryable retries anything", failures: []error{permanent, permanent}, wantCalls: 3},
		{name: "a permanent error ends at once", failures: []error{transient, permanent, transient}, retryable: onlyTransient, wantCalls: 2, wantErr: permanent},
		{name: "the deadline ends it", failures: make([]error, 1000), within: 30 * time.Millisecond, wantErr: transient},
		{name: "a cancelled context ends it", failures: make([]error, 1000), cancel: true, wantCalls: 1, wantErr: context.Canceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.failures {
				if c.failures[i] == nil {
					c.failures[i] = transient
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			err := Retry(ctx, quietLog(), "the step", c.within, c.retryable, func(context.Context) error {
				calls++
				if c.cancel {
					cancel()
				}
				if calls <= len(c.failures) {
					return c.failures[calls-1]
				}
				return nil
			})
			if !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
				t.Fatalf("Retry = %v, want %v", err, c.wantErr)
			}
			if c.wantCalls > 0 && calls != c.wantCalls {
				t.Errorf("op ran %d times, want %d", calls, c.wantCalls)
			}
			if c.within > 0 && calls < 3 {
				t.Errorf("op ran %d times before the deadline, want several", calls)
			}
		})
	}
}
