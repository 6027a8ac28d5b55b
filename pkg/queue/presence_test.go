package queue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMaxPollForLeavesRoomForALostPollAndABatch(t *testing.T) {
	for _, tc := range []struct {
		away int64
		want time.Duration
	}{
		{0, 0},
		{5, 1333333333},
		{10, 3 * time.Second},
		{60, 19666666666},
		{3600, 1199666666666},
	} {
		got := MaxPollFor(tc.away)
		if got != tc.want {
			t.Errorf("MaxPollFor(%d) = %v, want %v", tc.away, got, tc.want)
		}
		// Two intervals (one poll lost) and a batch's delay stay under the
		// away time.
		if tc.away > 0 && 2*got+SightingsEvery >= time.Duration(tc.away)*time.Second {
			t.Errorf("MaxPollFor(%d) = %v: two polls and a batch take %v, not under %d s", tc.away, got, 2*got+SightingsEvery, tc.away)
		}
	}
}

func TestPollHintNeverExceedsMaxPoll(t *testing.T) {
	maxPoll := MaxPollFor(5)
	for _, st := range []Standing{
		{State: Waiting, Position: 1_000_000, ConfiguredRate: 1},             // far back: 14 s uncapped
		{State: PreQueue, StartsIn: time.Hour, StartsAt: time.Now()},         // 30 s before the start
		{State: PreQueue, StartsIn: 0, StartsAt: time.Now(), PreQueued: 1e6}, // the draw: up to 5.5 s
	} {
		uncapped := st.RetryAfter()
		st.MaxPoll = maxPoll
		if got := st.RetryAfter(); got > maxPoll || got != min(uncapped, maxPoll) {
			t.Errorf("%s: RetryAfter %v, uncapped %v; want min of it and %v", st.State, got, uncapped, maxPoll)
		}
		for r := 0.0; r < 1; r += 0.1 {
			if got := st.pollHint(r); got > maxPoll || got <= 0 {
				t.Errorf("%s: poll hint %v at r=%.1f, want within (0, %v]", st.State, got, r, maxPoll)
			}
		}
		if uncapped <= maxPoll {
			t.Errorf("%s: the case is not capped (%v <= %v): it tests nothing", st.State, uncapped, maxPoll)
		}
	}
}

func TestAwayGraceFollowsAwayAfterUntilSet(t *testing.T) {
	patch := func(body string) Patch {
		t.Helper()
		p, errs := DecodePatch(json.RawMessage(body))
		if len(errs) > 0 {
			t.Fatalf("%s: %v", body, errs)
		}
		return p
	}
	c := DefaultConfig()
	if c.AwayAfterSeconds != 0 || c.AwayGraceSeconds != 0 {
		t.Fatalf("default presence knobs %d/%d, want off", c.AwayAfterSeconds, c.AwayGraceSeconds)
	}
	c = patch(`{"awayAfterSeconds": 30}`).Apply(c)
	if c.AwayAfterSeconds != 30 || c.AwayGraceSeconds != 30 {
		t.Fatalf("after awayAfterSeconds 30: %d/%d, want the grace to follow (30/30)", c.AwayAfterSeconds, c.AwayGraceSeconds)
	}
	c = patch(`{"awayGraceSeconds": 600}`).Apply(c)
	c = patch(`{"awayAfterSeconds": 60}`).Apply(c)
	if c.AwayAfterSeconds != 60 || c.AwayGraceSeconds != 600 {
		t.Fatalf("after a grace of its own: %d/%d, want 60/600", c.AwayAfterSeconds, c.AwayGraceSeconds)
	}
	c = patch(`{"awayAfterSeconds": 10, "awayGraceSeconds": 0}`).Apply(c)
	if c.AwayAfterSeconds != 10 || c.AwayGraceSeconds != 0 {
		t.Fatalf("both set: %d/%d, want 10/0", c.AwayAfterSeconds, c.AwayGraceSeconds)
	}
	for _, tc := range []struct {
		away, grace int64
		bad         string
	}{
		{0, 0, ""}, {5, 0, ""}, {3600, 86400, ""},
		{4, 4, "awayAfterSeconds"}, {-1, 0, "awayAfterSeconds"}, {3601, 0, "awayAfterSeconds"},
		{10, -1, "awayGraceSeconds"}, {10, 86401, "awayGraceSeconds"},
	} {
		c := DefaultConfig()
		c.AwayAfterSeconds, c.AwayGraceSeconds = tc.away, tc.grace
		errs := c.Validate()
		switch {
		case tc.bad == "" && len(errs) > 0:
			t.Errorf("%d/%d refused: %v", tc.away, tc.grace, errs)
		case tc.bad != "" && (len(errs) != 1 || errs[0].Field != tc.bad):
			t.Errorf("%d/%d: %v, want one error on %s", tc.away, tc.grace, errs, tc.bad)
		}
	}
}

func TestViewSaysWhenOnlyThePresentAreCounted(t *testing.T) {
	for _, tc := range []struct {
		st   Standing
		want bool
	}{
		{Standing{State: Waiting, Position: 3, MaxPoll: MaxPollFor(10)}, true},
		{Standing{State: PreQueue, MaxPoll: MaxPollFor(10)}, true},
		{Standing{State: Waiting, Position: 3}, false},
		{Standing{State: Admitted, MaxPoll: MaxPollFor(10)}, false},
	} {
		v, _ := NewView(tc.st, false)
		if v.PresentOnly != tc.want {
			t.Errorf("%s with MaxPoll %v: presentOnly %v, want %v", tc.st.State, tc.st.MaxPoll, v.PresentOnly, tc.want)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if has := json.Valid(b) && strings.Contains(string(b), `"presentOnly":true`); has != tc.want {
			t.Errorf("%s: JSON %s, presentOnly shown %v, want %v", tc.st.State, b, has, tc.want)
		}
	}
}
