package queue

import (
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"
)

// TestDrawKeyIsHMACSHA256OfTheUserKeyedWithTheSeed pins the draw to a value
// computed elsewhere (Python's hmac module), so an auditor's own
// implementation agrees with ours.
func TestDrawKeyIsHMACSHA256OfTheUserKeyedWithTheSeed(t *testing.T) {
	seed := "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	k, err := DrawKey(seed, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(k); got != "6eefad2bed97b6d93ee663d67a44b46016b3d79dcad54ada39b61a1d14874d1b" {
		t.Errorf("DrawKey = %s", got)
	}
	sha, err := SeedSHA256(seed)
	if err != nil || sha != "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd" {
		t.Errorf("SeedSHA256 = %s %v", sha, err)
	}
	for _, bad := range []string{"", "00", seed + "00", "zz" + seed[2:]} {
		if _, err := DrawKey(bad, "alice"); err == nil {
			t.Errorf("DrawKey accepted seed %q", bad)
		}
	}
	s1, h1, err := NewDrawSeed()
	if err != nil {
		t.Fatal(err)
	}
	s2, _, _ := NewDrawSeed()
	if h, _ := SeedSHA256(s1); h != h1 || len(s1) != 64 || s1 == s2 {
		t.Errorf("NewDrawSeed: %s / %s / %s", s1, h1, s2)
	}
}

// TestPreQueueRetrySpreadsThePollsAfterTheStart: far from the start a
// pre-queued page polls about every 30 s (never past the start); near it,
// its next poll falls after the start, spread over a window that grows with
// the pre-queue; during the draw, within a few seconds.
func TestPreQueueRetrySpreadsThePollsAfterTheStart(t *testing.T) {
	at := func(in time.Duration, pre int64, r float64) time.Duration {
		return Standing{State: PreQueue, StartsIn: in, PreQueued: pre}.preQueueRetry(r)
	}
	cases := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"an hour ahead, r=0", at(time.Hour, 10, 0), 27 * time.Second},
		{"an hour ahead, r=1", at(time.Hour, 10, 1), 33 * time.Second},
		{"10 s ahead, 100k pre-queued, r=0", at(10*time.Second, 100_000, 0), 10*time.Second + 500*time.Millisecond},
		{"10 s ahead, 100k pre-queued, r=0.5", at(10*time.Second, 100_000, 0.5), 10*time.Second + 500*time.Millisecond + 25*time.Second},
		{"10 s ahead, 10 pre-queued, r=1", at(10*time.Second, 10, 1), 11*time.Second + 500*time.Millisecond},
		{"10 s ahead, 1M pre-queued, r=1", at(10*time.Second, 1_000_000, 1), 70*time.Second + 500*time.Millisecond},
		{"drawing, 100k, r=1", at(0, 100_000, 1), 5*time.Second + 500*time.Millisecond},
		{"drawing, r=0", at(0, 100_000, 0), 500 * time.Millisecond},
		{"31 s ahead, r=1", at(31*time.Second, 10, 1), 31 * time.Second},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	v, retry := NewView(Standing{QueueID: "q", State: PreQueue, StartsAt: time.Unix(1_900_000_000, 0), StartsIn: 5 * time.Second, PreQueued: 7}, true)
	if v.State != "PRE_QUEUE" || v.StartsInMs != 5000 || v.PreQueued != 7 || v.StartsAt != "2030-03-17T17:46:40Z" || v.Position != 0 || v.EtaSeconds != 0 {
		t.Errorf("view %+v", v)
	}
	if retry < 5500*time.Millisecond || retry > 6500*time.Millisecond || v.RetryAfterMs != retry.Milliseconds() {
		t.Errorf("retry %v (%d ms), want 5.5 s + up to 1 s", retry, v.RetryAfterMs)
	}
}

// TestStartsAtPatch: an RFC 3339 time sets the start (to the millisecond,
// in UTC), null and "" remove it, anything else is refused with the field
// named; the config shows it only when set.
func TestStartsAtPatch(t *testing.T) {
	p, errs := DecodePatch([]byte(`{"startsAt":"2026-12-01T10:00:00.123456+01:00"}`))
	if len(errs) != 0 || p.StartsAt == nil || !p.StartsAt.Equal(time.Date(2026, 12, 1, 9, 0, 0, 123_000_000, time.UTC)) {
		t.Fatalf("decode: %v %v", p.StartsAt, errs)
	}
	c := p.Apply(DefaultConfig())
	b, _ := json.Marshal(c)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if m["startsAt"] != "2026-12-01T09:00:00.123Z" {
		t.Errorf("config JSON startsAt %v", m["startsAt"])
	}
	for _, clear := range []string{`{"startsAt":null}`, `{"startsAt":""}`} {
		p, errs := DecodePatch([]byte(clear))
		if len(errs) != 0 || p.StartsAt == nil || !p.Apply(c).StartsAt.IsZero() {
			t.Errorf("%s: %v %v", clear, p.StartsAt, errs)
		}
	}
	b, _ = json.Marshal(DefaultConfig())
	m = nil
	_ = json.Unmarshal(b, &m)
	if _, ok := m["startsAt"]; ok {
		t.Errorf("a config without a start shows startsAt: %s", b)
	}
	for _, bad := range []string{`{"startsAt":"tomorrow"}`, `{"startsAt":1700000000}`, `{"startsAt":"2026-12-01"}`} {
		if _, errs := DecodePatch([]byte(bad)); len(errs) != 1 || errs[0].Field != "startsAt" {
			t.Errorf("%s: %v, want one startsAt error", bad, errs)
		}
	}
}
