package queue

import (
	"math"
	"testing"
	"time"
)

func adaptiveConfig() Config {
	c := DefaultConfig()
	c.AdmissionMode, c.MinAdmissionRatePerSec, c.MaxAdmissionRatePerSec, c.TargetOrderLatencyMs = AdmissionAdaptive, 10, 170, 500
	return c
}

// TestRateControllerCutsFastAndClimbsBack: reports once a second. An
// overloaded order path (p95 over target) takes the rate from the maximum
// below half in two cuts, two seconds apart (the cooldown holds in
// between), down to the minimum and no further; healthy reports bring it
// back to the maximum in twenty steps; a report seen twice acts once.
func TestRateControllerCutsFastAndClimbsBack(t *testing.T) {
	cfg := adaptiveConfig()
	c := NewRateController()
	t0 := time.Unix(1_800_000_000, 0)
	rate := 170.0
	report := func(sec int, p95 time.Duration) RateStep {
		now := t0.Add(time.Duration(sec) * time.Second)
		c.Observe(OrderHealth{QueueID: "q", Source: "a", At: now, Interval: time.Second, Orders: 50, Created: 50, P95: p95})
		s := c.Step(cfg, rate, now)
		rate = s.Rate
		return s
	}
	want := []struct {
		rate     float64
		decision RateDecision
	}{{119, RateDecrease}, {119, RateCooldown}, {83.3, RateDecrease}, {83.3, RateCooldown}, {58.31, RateDecrease}}
	for i, w := range want {
		s := report(i, 900*time.Millisecond)
		if math.Abs(s.Rate-w.rate) > 0.01 || s.Decision != w.decision {
			t.Fatalf("overloaded second %d: %.2f %s (%s), want %.2f %s", i, s.Rate, s.Decision, s.Reason, w.rate, w.decision)
		}
	}
	sec := len(want)
	for ; rate > 10; sec++ {
		if sec > 30 {
			t.Fatalf("still at %.2f after %d overloaded seconds, want the minimum 10", rate, sec)
		}
		report(sec, 900*time.Millisecond)
	}
	if s := report(sec+2, 900*time.Millisecond); s.Rate != 10 || s.Decision != RateAtMin {
		t.Errorf("overloaded at the minimum: %.2f %s", s.Rate, s.Decision)
	}
	// Same report again: no second step.
	now := t0.Add(time.Duration(sec+2) * time.Second)
	if s := c.Step(cfg, rate, now.Add(300*time.Millisecond)); s.Rate != 10 || s.Decision != RateAtMin {
		t.Errorf("a step without a new report: %.2f %s", s.Rate, s.Decision)
	}
	start := sec + 3
	steps := 0
	for rate < 170 {
		s := report(start+steps, 100*time.Millisecond)
		steps++
		if s.Decision != RateIncrease && s.Decision != RateAtMax {
			t.Fatalf("healthy report %d: %s", steps, s.Decision)
		}
		if steps > 25 {
			t.Fatalf("rate %.2f after %d healthy seconds, want 170 within 20", rate, steps)
		}
	}
	if steps != IncreaseSteps {
		t.Errorf("back to the maximum in %d healthy seconds, want %d", steps, IncreaseSteps)
	}
	if s := report(start+steps, 100*time.Millisecond); s.Rate != 170 || s.Decision != RateAtMax {
		t.Errorf("healthy at the maximum: %.2f %s", s.Rate, s.Decision)
	}
}

// TestRateControllerHoldsWithoutNewsAndJudgesEverySource: no report for 5 s
// holds the rate (never up); 503s over 2 % of the attempts cut it, as does a
// slow replica among fast ones; an operator's narrower range clamps it.
func TestRateControllerHoldsWithoutNewsAndJudgesEverySource(t *testing.T) {
	cfg := adaptiveConfig()
	t0 := time.Unix(1_800_000_000, 0)
	c := NewRateController()
	if s := c.Step(cfg, 100, t0); s.Rate != 100 || s.Decision != RateHoldStale {
		t.Errorf("no report ever: %.1f %s", s.Rate, s.Decision)
	}
	c.Observe(OrderHealth{Source: "a", At: t0, Interval: time.Second, Orders: 10, P95: time.Millisecond})
	if s := c.Step(cfg, 100, t0.Add(6*time.Second)); s.Rate != 100 || s.Decision != RateHoldStale {
		t.Errorf("a 6 s old report: %.1f %s", s.Rate, s.Decision)
	}

	c = NewRateController()
	c.Observe(OrderHealth{Source: "a", At: t0, Interval: time.Second})
	if s := c.Step(cfg, 100, t0); s.Rate != 100 || s.Decision != RateHoldNoNews || !s.Fresh {
		t.Errorf("an interval in which no order finished: %.1f %s, want held", s.Rate, s.Decision)
	}

	c = NewRateController()
	c.Observe(OrderHealth{Source: "a", At: t0, Interval: time.Second, Orders: 100, Unavailable: 3, P95: 50 * time.Millisecond})
	if s := c.Step(cfg, 100, t0); math.Abs(s.Rate-70) > 1e-9 || s.Decision != RateDecrease {
		t.Errorf("3 of 100 unavailable: %.1f %s (%s)", s.Rate, s.Decision, s.Reason)
	}
	c = NewRateController()
	c.Observe(OrderHealth{Source: "a", At: t0, Interval: time.Second, Orders: 100, Unavailable: 2, P95: 50 * time.Millisecond})
	if s := c.Step(cfg, 100, t0); s.Rate != 108 || s.Decision != RateIncrease {
		t.Errorf("2 of 100 unavailable (the limit): %.1f %s", s.Rate, s.Decision)
	}
	c = NewRateController()
	c.Observe(OrderHealth{Source: "fast", At: t0, Interval: time.Second, Orders: 60, P95: 80 * time.Millisecond})
	c.Observe(OrderHealth{Source: "slow", At: t0.Add(-300 * time.Millisecond), Interval: time.Second, Orders: 40, P95: 700 * time.Millisecond})
	if s := c.Step(cfg, 100, t0); math.Abs(s.Rate-70) > 1e-9 || s.Decision != RateDecrease {
		t.Errorf("one slow replica: %.1f %s", s.Rate, s.Decision)
	}
	c = NewRateController()
	c.Observe(OrderHealth{Source: "a", At: t0, Interval: time.Second, Orders: 10, P95: time.Millisecond})
	narrow := cfg
	narrow.MinAdmissionRatePerSec, narrow.MaxAdmissionRatePerSec = 20, 40
	if s := c.Step(narrow, 100, t0); s.Rate != 40 || s.Decision != RateAtMax {
		t.Errorf("above a lowered maximum: %.1f %s", s.Rate, s.Decision)
	}
}

// TestAdaptiveKnobs: the range and the target are checked; min over max is
// refused.
func TestAdaptiveKnobs(t *testing.T) {
	c := adaptiveConfig()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("valid adaptive config: %v", errs)
	}
	c.MinAdmissionRatePerSec, c.MaxAdmissionRatePerSec, c.TargetOrderLatencyMs, c.AdmissionMode = 50, 40, 5, "SOMETIMES"
	errs := c.Validate()
	fields := map[string]bool{}
	for _, e := range errs {
		fields[e.Field] = true
	}
	if len(errs) != 3 || !fields["maxAdmissionRatePerSec"] || !fields["targetOrderLatencyMs"] || !fields["admissionMode"] {
		t.Errorf("errors %v", errs)
	}
	p, perrs := DecodePatch([]byte(`{"admissionMode":"ADAPTIVE","minAdmissionRatePerSec":5,"maxAdmissionRatePerSec":90.5,"targetOrderLatencyMs":300}`))
	got := p.Apply(DefaultConfig())
	if len(perrs) != 0 || got.AdmissionMode != AdmissionAdaptive || got.MinAdmissionRatePerSec != 5 || got.MaxAdmissionRatePerSec != 90.5 || got.TargetOrderLatencyMs != 300 {
		t.Errorf("patch: %+v %v", got, perrs)
	}
}

// TestOrderPathSummaryAddsTheLastIntervalUp: two replicas' reports of the
// last second add up (attempts, created, unavailable), the worst p95 and
// the largest backlog win; a report older than the interval is left out,
// and with none fresher than HealthStaleAfter there is no summary.
func TestOrderPathSummaryAddsTheLastIntervalUp(t *testing.T) {
	c := NewRateController()
	t0 := time.Now()
	if _, ok := c.Summary(t0); ok {
		t.Fatal("a summary without a report")
	}
	c.Observe(OrderHealth{Source: "old", At: t0.Add(-3 * time.Second), Interval: time.Second, Orders: 1000, Created: 1000, P95: time.Second})
	c.Observe(OrderHealth{Source: "a", At: t0, Interval: time.Second, Orders: 100, Created: 90, Unavailable: 4, P95: 80 * time.Millisecond, OutboxBacklog: 7})
	c.Observe(OrderHealth{Source: "b", At: t0.Add(-200 * time.Millisecond), Interval: time.Second, Orders: 60, Created: 60, P95: 120 * time.Millisecond, OutboxBacklog: 3})
	p, ok := c.Summary(t0)
	if want := (OrderPath{P95: 120 * time.Millisecond, Attempts: 160, Created: 150, Unavailable: 4, OutboxBacklog: 7}); !ok || p != want {
		t.Fatalf("summary %+v %v, want %+v", p, ok, want)
	}
	if _, ok := c.Summary(t0.Add(HealthStaleAfter + time.Second)); ok {
		t.Fatal("a summary from stale reports")
	}
}
