package wire

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

func TestStreamCapSettings(t *testing.T) {
	var cfg Config
	if err := config.LoadFrom(&cfg, map[string]string{"AUTH_DEV_MODE": "true"}); err != nil || cfg.MaxStreamsPerUser != 3 || cfg.ClientIPv6Prefix != 64 {
		t.Fatalf("defaults: SSE_MAX_STREAMS_PER_USER %d CLIENT_IPV6_PREFIX %d (%v), want 3 and 64", cfg.MaxStreamsPerUser, cfg.ClientIPv6Prefix, err)
	}
	for env, ok := range map[[2]string]bool{
		{"SSE_MAX_STREAMS_PER_USER", "0"}: true, {"SSE_MAX_STREAMS_PER_USER", "-1"}: false,
		{"CLIENT_IPV6_PREFIX", "56"}: true, {"CLIENT_IPV6_PREFIX", "128"}: true,
		{"CLIENT_IPV6_PREFIX", "16"}: false, {"CLIENT_IPV6_PREFIX", "200"}: false,
	} {
		var cfg Config
		err := config.LoadFrom(&cfg, map[string]string{"AUTH_DEV_MODE": "true", env[0]: env[1]})
		if (err == nil) != ok {
			t.Errorf("%s=%s: %v, want accepted=%v", env[0], env[1], err, ok)
		}
	}
}

// The wired service, configured from its environment behind a trusted
// proxy: a user holds at most SSE_MAX_STREAMS_PER_USER (default 3) streams,
// and an IPv6 client counts by CLIENT_IPV6_PREFIX for SSE_MAX_STREAMS_PER_IP.
func TestWiredStreamCapsPerUserAndPerIPv6Prefix(t *testing.T) {
	t.Parallel()
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	var cfg Config
	err := config.LoadFrom(&cfg, map[string]string{
		"HTTP_ADDR": "127.0.0.1:0", "OPS_ADDR": "127.0.0.1:0", "AUTH_JWT_SECRET": secret,
		"REDIS_URL": testenv.RedisURL(t), "AMQP_URL": testenv.AMQPURL(t), "AMQP_EXCHANGE": exchange,
		"TRUSTED_PROXIES": "127.0.0.1/32", "SSE_MAX_STREAMS_PER_IP": "2", "CLIENT_IPV6_PREFIX": "48",
		"SSE_POSITION_INTERVAL": "1h", "LOG_LEVEL": "warn",
	})
	if err != nil {
		t.Fatal(err)
	}
	url := replica(t, cfg)
	q := newQueue(t)
	ver, _ := auth.NewVerifier(secret)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	open := func(user, addr string) int {
		tok, err := ver.Mint(user, "", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/v1/queues/"+q+"/events?access_token="+tok, nil)
		req.Header.Set("X-Forwarded-For", addr)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			t.Cleanup(func() { res.Body.Close() })
		} else {
			res.Body.Close()
		}
		return res.StatusCode
	}
	tally := func(statuses ...int) (ok, limited int) {
		for _, s := range statuses {
			switch s {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("stream: status %d", s)
			}
		}
		return ok, limited
	}

	// One user, four networks: three streams, the fourth refused.
	if ok, limited := tally(open("fay", "2001:db8:a::1"), open("fay", "2001:db8:b::1"), open("fay", "2001:db8:c::1"), open("fay", "2001:db8:d::1")); ok != 3 || limited != 1 {
		t.Fatalf("one user from four /48s: %d open, %d × 429; want 3 and 1", ok, limited)
	}
	// Five users from five /64s of one /48: one client at /48, two streams.
	if ok, limited := tally(open("g1", "2001:db8:e:1::1"), open("g2", "2001:db8:e:2::1"), open("g3", "2001:db8:e:3::1"),
		open("g4", "2001:db8:e:4::1"), open("g5", "2001:db8:e:5::1")); ok != 2 || limited != 3 {
		t.Fatalf("five users from one /48: %d open, %d × 429; want 2 and 3", ok, limited)
	}
}
