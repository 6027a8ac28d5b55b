package wire

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func TestConfigFromEnvironment(t *testing.T) {
	var cfg Config
	err := config.LoadFrom(&cfg, map[string]string{
		"AUTH_JWT_SECRET":         strings.Repeat("k", 32),
		"ENTER_RATE_LIMIT_PER_IP": "25",
		"TRUSTED_PROXIES":         "10.0.0.0/8,192.168.1.1",
		"REDIS_URL":               "redis://r:6379/1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.OpsAddr != ":9080" || cfg.ReadTimeout != 10*time.Second || cfg.EnterRateLimitPerIP != 25 || len(cfg.TrustedProxies) != 2 || cfg.Redis.URL != "redis://r:6379/1" || cfg.DevMode {
		t.Fatalf("config = %+v", cfg)
	}
}

func TestConfigRefusesUnsafeSettings(t *testing.T) {
	tests := map[string]map[string]string{
		"no secret outside dev mode": {},
		"short secret":               {"AUTH_JWT_SECRET": "short"},
		"negative rate limit":        {"AUTH_DEV_MODE": "true", "ENTER_RATE_LIMIT_PER_IP": "-1"},
		"bad proxy":                  {"AUTH_DEV_MODE": "true", "TRUSTED_PROXIES": "not-a-cidr"},
		"bad duration":               {"AUTH_DEV_MODE": "true", "SHUTDOWN_TIMEOUT": "soon"},
		"no read timeout":            {"AUTH_DEV_MODE": "true", "HTTP_READ_TIMEOUT": "0s"},
		"write below read timeout":   {"AUTH_DEV_MODE": "true", "HTTP_READ_TIMEOUT": "20s", "HTTP_WRITE_TIMEOUT": "10s"},
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			var cfg Config
			if err := config.LoadFrom(&cfg, env); err == nil {
				t.Fatalf("config %v accepted", env)
			}
		})
	}
	var cfg Config
	if err := config.LoadFrom(&cfg, map[string]string{"AUTH_DEV_MODE": "true"}); err != nil || !cfg.DevMode {
		t.Fatalf("dev mode without a secret: %v", err)
	}
}

// The wired server: health endpoints answer on both listeners, /metrics only
// on the ops listener, and cancelling the context (what SIGTERM does) drains
// and returns cleanly.
func TestServerServesAndShutsDownGracefully(t *testing.T) {
	cfg := Config{HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second}, EnterRateLimitPerIP: 10, EnterChallengeTTL: time.Minute}
	cfg.Redis.URL = testenv.RedisURL(t)
	cfg.DevMode = true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	for _, c := range []struct {
		addr, path string
		want       int
	}{
		{srv.Addr(), "/healthz", http.StatusOK}, {srv.Addr(), "/readyz", http.StatusOK}, {srv.Addr(), "/metrics", http.StatusNotFound},
		{srv.OpsAddr(), "/healthz", http.StatusOK}, {srv.OpsAddr(), "/readyz", http.StatusOK}, {srv.OpsAddr(), "/metrics", http.StatusOK},
	} {
		res, err := http.Get("http://" + c.addr + c.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Fatalf("%s%s: %d, want %d", c.addr, c.path, res.StatusCode, c.want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v, want nil after a graceful shutdown", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of cancellation")
	}
	for _, addr := range []string{srv.Addr(), srv.OpsAddr()} {
		if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
			t.Fatalf("%s still serving after shutdown", addr)
		}
	}
}
