package dispatch_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// TestAdaptiveRateFollowsTheOrderPathsHealth: two replicas receive every
// health report (as the broker's fan-out gives them). Slow reports (p95
// over the target) cut the effective rate from the maximum to below half
// within three seconds; the leader dies and the standby goes on from the
// recorded rate, not from the configured one; healthy reports raise it a
// step a second; with no report for five seconds it holds. The recorded
// reason says which.
func TestAdaptiveRateFollowsTheOrderPathsHealth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newCluster(t, dispatch.Options{Tick: 100 * time.Millisecond, Lease: 600 * time.Millisecond})
	q := c.newQueue(func(cfg *queue.Config) {
		cfg.AdmissionMode, cfg.MinAdmissionRatePerSec, cfg.MaxAdmissionRatePerSec, cfg.TargetOrderLatencyMs = queue.AdmissionAdaptive, 10, 100, 300
		cfg.AdmissionRatePerSec = 100
	})
	c.start(2)
	first := c.leader(q)
	k := redisstore.KeysFor(q)
	effective := func() (float64, string) {
		v := c.rdb.HMGet(ctx, k.Dispatch(), "effectiveRate", "rateReason").Val()
		s, _ := v[0].(string)
		why, _ := v[1].(string)
		f, _ := strconv.ParseFloat(s, 64)
		return f, why
	}
	report := func(p95 time.Duration) {
		h := queue.OrderHealth{QueueID: q, Source: "orders-1", At: time.Now(), Interval: time.Second, Orders: 40, Created: 40, P95: p95}
		for _, r := range c.replicas {
			r.d.ObserveHealth(h)
		}
	}
	waitFor := func(what string, within time.Duration, feed time.Duration, cond func(float64, string) bool) (float64, string) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			if feed > 0 {
				report(feed)
			}
			time.Sleep(time.Second)
			rate, why := effective()
			if cond(rate, why) {
				return rate, why
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: effective rate %v (%s) after %v", what, rate, why, within)
			}
		}
	}
	start := time.Now()
	rate, why := waitFor("slow order path", 6*time.Second, 900*time.Millisecond, func(r float64, _ string) bool { return r > 0 && r < 50 })
	t.Logf("below half of the maximum after %v: %.1f (%s)", time.Since(start).Round(100*time.Millisecond), rate, why)
	if !strings.HasPrefix(why, "DECREASE") && !strings.HasPrefix(why, "COOLDOWN") {
		t.Errorf("reason %q, want a DECREASE or COOLDOWN", why)
	}

	// The leader dies; the standby takes over from the recorded rate.
	first.store.crashed.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for c.leader(q) == first {
		if time.Now().After(deadline) {
			t.Fatal("no takeover within 5 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if after, why := effective(); after > rate+0.01 || after < 10 {
		t.Errorf("after the takeover the effective rate is %v (%s), want the recorded %v or lower", after, why, rate)
	}

	before, _ := effective()
	rate, why = waitFor("healthy order path", 5*time.Second, 50*time.Millisecond, func(r float64, _ string) bool { return r >= before+3*4.5-0.01 })
	if !strings.HasPrefix(why, "INCREASE") {
		t.Errorf("climbing with reason %q, want INCREASE", why)
	}
	t.Logf("three healthy reports later: %.1f (%s)", rate, why)

	held, _ := effective()
	rate, why = waitFor("no reports", 8*time.Second, 0, func(_ float64, why string) bool { return strings.HasPrefix(why, "HOLD_STALE") })
	if rate > held+4.5+0.01 {
		t.Errorf("without reports the rate went from %v to %v, want held", held, rate)
	}
	time.Sleep(1500 * time.Millisecond)
	if again, _ := effective(); again != rate {
		t.Errorf("stale health: rate moved from %v to %v", rate, again)
	}
}
