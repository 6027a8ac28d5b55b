package config

import (
	"strings"
	"testing"
)

type orderFailedOnly struct{ OrderFailed }

func (c *orderFailedOnly) Validate() error { return c.Check() }

func TestOrderFailedDefaultsAndCheck(t *testing.T) {
	var c orderFailedOnly
	if err := LoadFrom(&c, map[string]string{}); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if c.OrderFailedQueue != "admission-dispatcher.order-failed" || c.OrderFailedDeliveryLimit != 20 {
		t.Fatalf("defaults %q / %d, want admission-dispatcher.order-failed / 20", c.OrderFailedQueue, c.OrderFailedDeliveryLimit)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string // "" = valid
	}{
		{map[string]string{"ORDER_FAILED_QUEUE": "test.order-failed", "ORDER_FAILED_DELIVERY_LIMIT": "1"}, ""},
		{map[string]string{"ORDER_FAILED_DELIVERY_LIMIT": "0"}, "ORDER_FAILED_DELIVERY_LIMIT positive"},
		{map[string]string{"ORDER_FAILED_DELIVERY_LIMIT": "-3"}, "ORDER_FAILED_DELIVERY_LIMIT positive"},
	} {
		var c orderFailedOnly
		err := LoadFrom(&c, tc.env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v, want valid", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error saying %q", tc.env, err, tc.want)
		}
	}
	// An empty ORDER_FAILED_QUEUE loads as the default; a struct built by
	// hand without a name is refused.
	if err := (OrderFailed{OrderFailedDeliveryLimit: 20}).Check(); err == nil || !strings.Contains(err.Error(), "ORDER_FAILED_QUEUE must be set") {
		t.Errorf("no queue name: %v, want ORDER_FAILED_QUEUE must be set", err)
	}
}
