package config

import (
	"strings"
	"testing"
	"time"
)

type httpOnly struct{ HTTP }

func (c *httpOnly) Validate() error { return c.Check() }

func TestHTTPTimeoutDefaults(t *testing.T) {
	var c httpOnly
	if err := LoadFrom(&c, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	if c.ReadTimeout != 10*time.Second || c.WriteTimeout != 30*time.Second || c.IdleTimeout != 120*time.Second {
		t.Fatalf("defaults %+v, want read 10s, write 30s, idle 120s", c.HTTP)
	}
	// A write timeout equal to the read timeout is allowed (tests use 2s/2s).
	if err := LoadFrom(&c, map[string]string{"HTTP_READ_TIMEOUT": "2s", "HTTP_WRITE_TIMEOUT": "2s"}); err != nil || c.WriteTimeout != 2*time.Second {
		t.Fatalf("2s/2s: %v %+v", err, c.HTTP)
	}
}

func TestHTTPTimeoutsRefused(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"zero read":        {map[string]string{"HTTP_READ_TIMEOUT": "0s"}, "must be positive"},
		"negative idle":    {map[string]string{"HTTP_IDLE_TIMEOUT": "-1s"}, "must be positive"},
		"zero write":       {map[string]string{"HTTP_WRITE_TIMEOUT": "0"}, "must be positive"},
		"write below read": {map[string]string{"HTTP_READ_TIMEOUT": "20s", "HTTP_WRITE_TIMEOUT": "10s"}, "at least HTTP_READ_TIMEOUT"},
		"not a duration":   {map[string]string{"HTTP_READ_TIMEOUT": "soon"}, `invalid duration "soon"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c httpOnly
			if err := LoadFrom(&c, tc.env); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
