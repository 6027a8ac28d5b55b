package wire

import (
	"testing"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// The in-process limits' knobs: safe defaults, negative values refused.
func TestConfigLocalLimits(t *testing.T) {
	base := func(kv ...string) map[string]string {
		m := map[string]string{"AUTH_JWT_SECRET": testSecret}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	var c Config
	if err := config.LoadFrom(&c, base()); err != nil {
		t.Fatal(err)
	}
	if c.OrderLocalRatePerUser != 10 || c.OrderLocalInFlightPerUser != 4 || c.OrderLookupRatePerUser != 5 || c.OrderLookupMaxInFlight != 8 ||
		c.PublicRatePerIP != 20 || c.LocalLimits.Keys != 100_000 || c.ClientIPv6Prefix != 64 {
		t.Fatalf("defaults %+v", c)
	}
	for _, kv := range [][]string{
		{"ORDER_LOCAL_RATE_PER_USER", "-1"}, {"ORDER_LOCAL_INFLIGHT_PER_USER", "-1"}, {"ORDER_LOOKUP_RATE_PER_USER", "-1"},
		{"ORDER_LOOKUP_MAX_INFLIGHT", "-1"}, {"PUBLIC_RATE_LIMIT_PER_IP", "-1"}, {"LOCAL_LIMIT_KEYS", "999"}, {"CLIENT_IPV6_PREFIX", "8"},
	} {
		var c Config
		if err := config.LoadFrom(&c, base(kv...)); err == nil {
			t.Errorf("%v accepted", kv)
		}
	}
	var off Config
	if err := config.LoadFrom(&off, base("ORDER_LOCAL_RATE_PER_USER", "0", "ORDER_LOCAL_INFLIGHT_PER_USER", "0", "ORDER_LOOKUP_RATE_PER_USER", "0",
		"ORDER_LOOKUP_MAX_INFLIGHT", "0", "PUBLIC_RATE_LIMIT_PER_IP", "0")); err != nil {
		t.Fatalf("every limit off: %v", err)
	}
	l, err := localLimits(off)
	if err != nil || l.Orders != nil || l.Lookups != nil || l.LookupsInFlight != nil || l.Public != nil {
		t.Fatalf("every limit off: %+v %v", l, err)
	}
}
