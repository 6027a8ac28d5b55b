package queue

import (
	"testing"
	"time"
)

// TestBypasses: only a queue that fails OPEN, is OPEN and has started lets
// people order without a token while Redis is away.
func TestBypasses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	base := DefaultConfig()
	base.FailMode = FailOpen
	cases := []struct {
		name string
		mut  func(*Config)
		want bool
	}{
		{"fails OPEN, OPEN", func(*Config) {}, true},
		{"fails CLOSED", func(c *Config) { c.FailMode = FailClosed }, false},
		{"PAUSED", func(c *Config) { c.State = Paused }, false},
		{"CLOSED", func(c *Config) { c.State = Closed }, false},
		{"start ahead", func(c *Config) { c.StartsAt = now.Add(time.Millisecond) }, false},
		{"start now", func(c *Config) { c.StartsAt = now }, true},
	}
	got := 0
	for _, tc := range cases {
		c := base
		tc.mut(&c)
		if b := c.Bypasses(now); b != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, b, tc.want)
		}
		if c.Bypasses(now) {
			got++
		}
	}
	if got != 2 {
		t.Errorf("%d of %d bypass, want 2", got, len(cases))
	}
	if DefaultConfig().Bypasses(now) {
		t.Error("the default config bypasses: it must fail CLOSED")
	}
}
