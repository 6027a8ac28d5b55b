package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// TestAdaptiveRateIsKeptInRangeRecordedAndShown: an ADAPTIVE queue's tick
// admits at the proposed rate, clamped to the queue's range, records it
// (and why) where enter and the admin view read it, and keeps it when a
// tick proposes none; back to FIXED, the configured rate rules and the
// record goes. The admissions follow the rate: 50/s over a second of ticks
// admits about 50, not the configured 175.
func TestAdaptiveRateIsKeptInRangeRecordedAndShown(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := context.Background()
	q := newQueue(t, s, func(c *queue.Config) {
		c.AdmissionMode, c.MinAdmissionRatePerSec, c.MaxAdmissionRatePerSec, c.TargetOrderLatencyMs = queue.AdmissionAdaptive, 10, 100, 400
		c.ActivationSpreadMs = 0
	})
	k := redisstore.KeysFor(q)
	fill(t, s, q, 300)
	epoch := lead(t, s, q, "d1")
	tick := func(rate float64, why string) queue.IssueResult {
		t.Helper()
		r, err := s.Issue(ctx, q, queue.IssueRequest{Epoch: epoch, Tick: 100 * time.Millisecond, Grants: grants(t, 30), Rate: rate, RateReason: why})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := tick(50, "healthy")
	if r.Rate != 50 || r.Mode != queue.AdmissionAdaptive || r.MinRate != 10 || r.MaxRate != 100 || r.TargetLatency != 400*time.Millisecond {
		t.Fatalf("tick at 50: %+v", r)
	}
	start := time.Now()
	issued := 0
	for time.Since(start) < time.Second {
		time.Sleep(100 * time.Millisecond)
		issued += tick(50, "healthy").Issued
	}
	if issued < 40 || issued > 62 {
		t.Errorf("%d admitted in a second at 50/s, want about 50", issued)
	}
	if r = tick(500, "too much"); r.Rate != 100 {
		t.Errorf("a proposal over the maximum: rate %v, want 100", r.Rate)
	}
	if r = tick(0, ""); r.Rate != 100 {
		t.Errorf("no proposal: rate %v, want the recorded 100", r.Rate)
	}
	if got := rdb.HMGet(ctx, k.Dispatch(), "effectiveRate", "rateReason").Val(); got[0] != "100" || got[1] != "too much" {
		t.Errorf("recorded %v, want 100 and the last reason", got)
	}
	st, err := s.Position(ctx, q, "u0299")
	if err != nil || st.ConfiguredRate != 100 {
		t.Errorf("position's rate %v (%v), want the effective 100", st.ConfiguredRate, err)
	}
	_, stats, _ := s.Config(ctx, q)
	if stats.EffectiveRate != 100 || stats.RateReason != "too much" {
		t.Errorf("stats: effective %v, reason %q", stats.EffectiveRate, stats.RateReason)
	}
	if _, _, err := s.UpdateConfig(ctx, q, func(c queue.Config, _ bool) (queue.Config, error) {
		c.AdmissionMode = queue.AdmissionFixed
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	if r = tick(30, "ignored"); r.Rate != 175 || r.Mode != queue.AdmissionFixed {
		t.Errorf("FIXED again: %+v, want the configured 175", r)
	}
	if n := rdb.HExists(ctx, k.Dispatch(), "effectiveRate").Val(); n {
		t.Error("a FIXED queue still has an effective rate recorded")
	}
}
