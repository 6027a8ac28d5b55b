package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

type testConfig struct {
	config.Log
}

// runFunc is a Runner made of a function.
type runFunc func(context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

// serving makes a service constructor of a serve function.
func serving(serve func(context.Context, testConfig, *slog.Logger) error) func(context.Context, testConfig, *slog.Logger) (runFunc, error) {
	return func(_ context.Context, cfg testConfig, log *slog.Logger) (runFunc, error) {
		return func(ctx context.Context) error { return serve(ctx, cfg, log) }, nil
	}
}

func get(url string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

func TestRunServesPprofOnItsOwnAddressWhileServing(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	t.Setenv("PPROF_ADDR", addr)
	t.Setenv("LOG_LEVEL", "error")
	served := 0
	err := Run(context.Background(), "pprof-test", serving(func(_ context.Context, cfg testConfig, _ *slog.Logger) error {
		served++
		if cfg.PprofAddr != addr {
			return fmt.Errorf("PprofAddr %q, want %q", cfg.PprofAddr, addr)
		}
		code, body, err := get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if err != nil || code != http.StatusOK || !strings.Contains(body, "goroutine profile: total") {
			return fmt.Errorf("goroutine profile: %d %v %.80q", code, err, body)
		}
		if code, _, err := get("http://" + addr + "/debug/pprof/profile?seconds=1"); err != nil || code != http.StatusOK {
			return fmt.Errorf("cpu profile: %d %v", code, err)
		}
		if code, _, err := get("http://" + addr + "/api/v1/anything"); err != nil || code != http.StatusNotFound {
			return fmt.Errorf("a non-pprof path on the pprof port: %d %v, want 404", code, err)
		}
		return nil
	}))
	if err != nil || served != 1 {
		t.Fatalf("Run = %v after %d serve calls, want nil after 1", err, served)
	}
	// Closed with the service.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Run returned", addr)
	}
}

func TestRunFailsWhenThePprofAddressIsTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("PPROF_ADDR", ln.Addr().String())
	t.Setenv("LOG_LEVEL", "error")
	served := 0
	err = Run(context.Background(), "pprof-test", serving(func(context.Context, testConfig, *slog.Logger) error { served++; return nil }))
	if err == nil || !strings.Contains(err.Error(), "PPROF_ADDR") || served != 0 {
		t.Fatalf("Run = %v after %d serve calls, want a PPROF_ADDR error before serving", err, served)
	}
}

func TestRunWithoutPprofAddressServes(t *testing.T) {
	t.Setenv("PPROF_ADDR", "")
	t.Setenv("LOG_LEVEL", "error")
	served := 0
	err := Run(context.Background(), "pprof-test", serving(func(_ context.Context, cfg testConfig, _ *slog.Logger) error {
		served++
		if cfg.PprofAddress() != "" {
			return fmt.Errorf("PprofAddress %q, want off", cfg.PprofAddress())
		}
		return nil
	}))
	if err != nil || served != 1 {
		t.Fatalf("Run = %v after %d serve calls, want nil after 1", err, served)
	}
}
