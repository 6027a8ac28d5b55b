package wire

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func TestClientIPv6PrefixSetting(t *testing.T) {
	var cfg Config
	if err := config.LoadFrom(&cfg, map[string]string{"AUTH_DEV_MODE": "true"}); err != nil || cfg.ClientIPv6Prefix != 64 {
		t.Fatalf("default CLIENT_IPV6_PREFIX = %d (%v), want 64", cfg.ClientIPv6Prefix, err)
	}
	for v, ok := range map[string]bool{"32": true, "48": true, "128": true, "31": false, "129": false, "0": false, "-64": false, "/64": false} {
		var cfg Config
		err := config.LoadFrom(&cfg, map[string]string{"AUTH_DEV_MODE": "true", "CLIENT_IPV6_PREFIX": v})
		if (err == nil) != ok {
			t.Errorf("CLIENT_IPV6_PREFIX=%s: %v, want accepted=%v", v, err, ok)
		}
	}
}

// The wired gateway limits enters per CLIENT_IPV6_PREFIX network: at /48,
// ten /64s of one /48 are one client.
func TestWiredEnterLimitCountsByTheConfiguredPrefix(t *testing.T) {
	var cfg Config
	err := config.LoadFrom(&cfg, map[string]string{
		"AUTH_DEV_MODE": "true", "HTTP_ADDR": "127.0.0.1:0", "OPS_ADDR": "127.0.0.1:0", "REDIS_URL": testenv.RedisURL(t),
		"ENTER_RATE_LIMIT_PER_IP": "3", "TRUSTED_PROXIES": "127.0.0.1/32", "CLIENT_IPV6_PREFIX": "48",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// The limit is checked before the token: an allowed enter without one
	// is 401, a limited one 429.
	count := func(addrs []string) (allowed, limited int) {
		for _, a := range addrs {
			req, _ := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/api/v1/queues/q/enter", nil)
			req.Header.Set("X-Forwarded-For", a)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			switch res.StatusCode {
			case http.StatusUnauthorized:
				allowed++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("enter from %s: %d", a, res.StatusCode)
			}
		}
		return allowed, limited
	}
	site := rand.N(0x10000) // a /48 no other run is using this second
	var one48, many48 []string
	for i := range 10 {
		one48 = append(one48, fmt.Sprintf("2001:db8:%x:%x::1", site, i))
		many48 = append(many48, fmt.Sprintf("2001:db8:%x::1", (site+1+i)%0x10000))
	}
	// Sequential, so the burst can refill meanwhile: at least 3, and the
	// ten /48s below show what "no limit" would have looked like.
	if allowed, limited := count(one48); allowed < 3 || limited < 5 || allowed+limited != 10 {
		t.Fatalf("ten /64s of one /48: %d allowed, %d × 429; want 3 (and a few refilled at most) and the rest 429", allowed, limited)
	}
	if allowed, limited := count(many48); allowed != 10 || limited != 0 {
		t.Fatalf("ten /48s: %d allowed, %d × 429; want 10 allowed", allowed, limited)
	}
}
