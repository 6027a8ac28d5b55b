package wire

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// TestHealthReportsOverTheBrokerSteerAnAdaptiveQueue: OrderHealth messages
// published on order.health, as the order-service sends them, reach the
// wired dispatcher's controller: slow reports (p95 900 ms against a 300 ms
// target) take the effective rate of an ADAPTIVE queue from 100 to below
// 50 within 6 s, and the recorded reason says why; a message that is not
// an OrderHealth changes nothing.
func TestHealthReportsOverTheBrokerSteerAnAdaptiveQueue(t *testing.T) {
	t.Parallel()
	s := newStack(t, false, func(c *queue.Config) {
		c.AdmissionMode, c.MinAdmissionRatePerSec, c.MaxAdmissionRatePerSec, c.TargetOrderLatencyMs = queue.AdmissionAdaptive, 10, 100, 300
		c.AdmissionRatePerSec = 100
	})
	s.run()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	k := redisstore.KeysFor(s.q)
	effective := func() (float64, string) {
		v := rdb.HMGet(ctx, k.Dispatch(), "effectiveRate", "rateReason").Val()
		str, _ := v[0].(string)
		why, _ := v[1].(string)
		f, _ := strconv.ParseFloat(str, 64)
		return f, why
	}
	testenv.WaitFor(t, 10*time.Second, "the first tick", func() bool { r, _ := effective(); return r == 100 })
	// The dispatcher's health queue is server-named and bound once it
	// consumes; the reports before that are parked as unrouted, as in
	// production before any dispatcher runs.
	publish := func(h queue.OrderHealth) {
		t.Helper()
		m := events.HealthMessage(h)
		if err := s.conn.Publisher().Publish(ctx, broker.Event{ID: m.GetEventId(), RoutingKey: events.RoutingKeyOrderHealth, Time: h.At, Message: m}); err != nil {
			t.Fatal(err)
		}
	}
	junk := orderFailed(s.q, "u", "tid", "oid", true)
	junk.RoutingKey = events.RoutingKeyOrderHealth
	if err := s.conn.Publisher().Publish(ctx, junk); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := start.Add(8 * time.Second)
	for {
		publish(queue.OrderHealth{QueueID: s.q, Source: "orders-test", At: time.Now(), Interval: time.Second, Orders: 30, Created: 30, P95: 900 * time.Millisecond})
		time.Sleep(time.Second)
		if r, why := effective(); r < 50 {
			if !strings.HasPrefix(why, "DECREASE") && !strings.HasPrefix(why, "COOLDOWN") {
				t.Errorf("reason %q", why)
			}
			t.Logf("effective rate %.1f after %v of slow reports: %s", r, time.Since(start).Round(100*time.Millisecond), why)
			break
		}
		if time.Now().After(deadline) {
			r, why := effective()
			t.Fatalf("effective rate %.1f (%s) after 8 s of slow reports, want below 50", r, why)
		}
	}
}
