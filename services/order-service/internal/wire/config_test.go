package wire

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
)

func TestConfigRetention(t *testing.T) {
	base := map[string]string{
		"REDIS_URL": "redis://127.0.0.1:6379/0", "AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/",
		"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/orders", "AUTH_JWT_SECRET": testSecret,
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	var c Config
	if err := config.LoadFrom(&c, with()); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.OutboxRetention != 72*time.Hour || c.IdempotencyKeyRetention != 24*time.Hour || c.RetentionInterval != 5*time.Minute {
		t.Fatalf("default retention %s / %s every %s, want 72h / 24h every 5m", c.OutboxRetention, c.IdempotencyKeyRetention, c.RetentionInterval)
	}
	for _, tc := range []struct {
		env  []string
		want string // "" = valid
	}{
		{[]string{"OUTBOX_RETENTION", "0", "IDEMPOTENCY_KEY_RETENTION", "0"}, ""},
		{[]string{"OUTBOX_RETENTION", "1h"}, ""},
		{[]string{"OUTBOX_RETENTION", "59m"}, "OUTBOX_RETENTION must be 0 (keep forever) or at least 1h0m0s"},
		{[]string{"IDEMPOTENCY_KEY_RETENTION", "10m"}, "IDEMPOTENCY_KEY_RETENTION must be 0"},
		{[]string{"ORDER_LEASE", "10m", "OUTBOX_RETENTION", "90m"}, "ten ORDER_LEASEs, got 1h30m0s"},
		{[]string{"RETENTION_INTERVAL", "0s"}, "RETENTION_INTERVAL must be positive"},
	} {
		var c Config
		err := config.LoadFrom(&c, with(tc.env...))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v, want valid", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error saying %q", tc.env, err, tc.want)
		}
	}
}

func TestConfigHealthInterval(t *testing.T) {
	base := map[string]string{
		"REDIS_URL": "redis://127.0.0.1:6379/0", "AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/",
		"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/orders", "AUTH_JWT_SECRET": testSecret,
	}
	var c Config
	if err := config.LoadFrom(&c, base); err != nil || c.HealthInterval != time.Second {
		t.Fatalf("default ORDER_HEALTH_INTERVAL %s (%v), want 1s", c.HealthInterval, err)
	}
	for _, tc := range []struct {
		value string
		want  time.Duration
		err   bool
	}{
		{"0", 0, false}, // off
		{"100ms", 100 * time.Millisecond, false},
		{"2s", 2 * time.Second, false},
		{"99ms", 0, true},
		{"3s", 0, true},
		{"-1s", 0, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			env := map[string]string{"ORDER_HEALTH_INTERVAL": tc.value}
			for k, v := range base {
				env[k] = v
			}
			var c Config
			err := config.LoadFrom(&c, env)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), "ORDER_HEALTH_INTERVAL must be 0 (off) or between 100ms and 2s") {
					t.Fatalf("%v, want the ORDER_HEALTH_INTERVAL error", err)
				}
				return
			}
			if err != nil || c.HealthInterval != tc.want {
				t.Fatalf("%s (%v), want %s", c.HealthInterval, err, tc.want)
			}
		})
	}
}

// Every process names itself apart, even two on one host.
func TestReplicaID(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	a, b := replicaID(), replicaID()
	if a == b || !strings.HasPrefix(a, host+"-") || len(a) != len(host)+9 {
		t.Fatalf("replica ids %q and %q, want %q and 8 different hex digits each", a, b, host+"-")
	}
}

func TestConfigGroupCommit(t *testing.T) {
	base := map[string]string{
		"REDIS_URL": "redis://127.0.0.1:6379/0", "AMQP_URL": "amqp://guest:guest@127.0.0.1:5672/",
		"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/orders", "AUTH_JWT_SECRET": testSecret,
	}
	var c Config
	if err := config.LoadFrom(&c, base); err != nil || c.OrderGroupCommit != 64 {
		t.Fatalf("default ORDER_GROUP_COMMIT %d (%v), want 64", c.OrderGroupCommit, err)
	}
	for value, valid := range map[string]bool{"1": true, "1000": true, "0": false, "1001": false, "-5": false} {
		env := map[string]string{"ORDER_GROUP_COMMIT": value}
		for k, v := range base {
			env[k] = v
		}
		var c Config
		err := config.LoadFrom(&c, env)
		if valid != (err == nil) || (!valid && !strings.Contains(err.Error(), "ORDER_GROUP_COMMIT must be between 1 (every order alone) and 1000")) {
			t.Errorf("ORDER_GROUP_COMMIT=%s: %v, want valid %v", value, err, valid)
		}
	}
}
