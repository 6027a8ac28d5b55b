package wire

import (
	"testing"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// The in-process limits' knobs: safe defaults, and negative values (or a
// key bound too small to hold a sale's users) refused at start.
func TestConfigLocalLimits(t *testing.T) {
	var cfg Config
	if err := config.LoadFrom(&cfg, map[string]string{"AUTH_DEV_MODE": "true"}); err != nil {
		t.Fatal(err)
	}
	if cfg.PublicRatePerIP != 20 || cfg.PositionRatePerUser != 20 || cfg.LocalLimits.Keys != 100_000 {
		t.Fatalf("defaults: public %d/s, position %d/s, %d keys; want 20, 20, 100000", cfg.PublicRatePerIP, cfg.PositionRatePerUser, cfg.LocalLimits.Keys)
	}
	for _, env := range []map[string]string{
		{"PUBLIC_RATE_LIMIT_PER_IP": "-1"},
		{"POSITION_RATE_LIMIT_PER_USER": "-1"},
		{"LOCAL_LIMIT_KEYS": "10"},
	} {
		env["AUTH_DEV_MODE"] = "true"
		var c Config
		if err := config.LoadFrom(&c, env); err == nil {
			t.Errorf("%v accepted", env)
		}
	}
	for _, env := range []map[string]string{{"PUBLIC_RATE_LIMIT_PER_IP": "0", "POSITION_RATE_LIMIT_PER_USER": "0"}} {
		env["AUTH_DEV_MODE"] = "true"
		var c Config
		if err := config.LoadFrom(&c, env); err != nil {
			t.Errorf("%v (limits off): %v", env, err)
		}
	}
}
