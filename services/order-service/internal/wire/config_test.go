package wire

import (
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
