package testenv

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Runner is what every service's wire.New returns.
type Runner interface {
	Run(ctx context.Context) error
	OpsAddr() string
}

// CheckLifecycle starts a service in process twice. The first time it
// waits for the ops listener's /readyz, stops the service with its context
// (what SIGTERM does), and checks that Run returns nil and that no
// goroutine the service started is left. The second time it calls brk,
// which makes one component fail, and checks that Run returns on its own
// with an error naming want: a component's failure reaches the caller.
// Call it from a test that is not parallel: it counts goroutines.
func CheckLifecycle[S Runner](t *testing.T, start func(ctx context.Context) (S, error), brk func(S), want string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ready := func(s S) {
		t.Helper()
		WaitFor(t, 30*time.Second, "the service's ops /readyz", func() bool {
			res, err := client.Get("http://" + s.OpsAddr() + "/readyz")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
	}
	run := func(s S, ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return done
	}
	wait := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s")
			return nil
		}
	}

	t.Run("stopped by its context, nothing left", func(t *testing.T) {
		// Connections end their goroutines a moment after Close: allow a
		// few seconds before a goroutine counts as left behind.
		before := goleak.IgnoreCurrent()
		defer func() {
			deadline := time.Now().Add(5 * time.Second)
			err := goleak.Find(before)
			for err != nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				err = goleak.Find(before)
			}
			if err != nil {
				t.Errorf("left behind after Run returned: %v", err)
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := run(s, ctx)
		ready(s)
		cancel()
		if err := wait(done); err != nil {
			t.Fatalf("Run after its context ended: %v, want nil", err)
		}
	})
	t.Run("a failing component stops it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := run(s, ctx)
		ready(s)
		brk(s)
		err = wait(done)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run after a component broke: %v, want an error naming %q", err, want)
		}
	})
}
