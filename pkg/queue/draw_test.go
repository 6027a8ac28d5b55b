package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// spearman is the rank correlation of position i (entry order) with the
// drawn rank of the i-th entrant.
func spearman(entry, drawn []string) float64 {
	rank := make(map[string]int, len(drawn))
	for i, u := range drawn {
		rank[u] = i
	}
	n := float64(len(entry))
	var d2 float64
	for i, u := range entry {
		d := float64(i - rank[u])
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// TestDrawOrderIsUniformAndIgnoresArrival: over 200 fixed seeds (so the
// figures are the same on every run), 300 people who entered in id order
// are drawn with no relation to it: the rank correlation averages 0 and
// stays under 0.15 for at least 97 % of the seeds (about 99 % for a
// uniform permutation); the first tenth to arrive gets an average drawn
// place of the middle; the order does not depend on the order ids are
// given in.
func TestDrawOrderIsUniformAndIgnoresArrival(t *testing.T) {
	users := make([]string, 300)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
	}
	const seeds = 200
	var sumRho, earlyRank float64
	under := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range seeds {
		sum := sha256.Sum256([]byte(fmt.Sprintf("seed-%d", i)))
		seed := hex.EncodeToString(sum[:])
		order, err := DrawOrder(seed, users)
		if err != nil {
			t.Fatal(err)
		}
		rho := spearman(users, order)
		sumRho += rho
		if math.Abs(rho) < 0.15 {
			under++
		}
		for j, u := range order {
			if slices.Index(users, u) < 30 {
				earlyRank += float64(j)
			}
		}
		shuffled := slices.Clone(users)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if again, _ := DrawOrder(seed, shuffled); !slices.Equal(again, order) {
			t.Fatalf("seed %d: the order depends on the order ids were given in", i)
		}
	}
	mean := sumRho / seeds
	early := earlyRank / (seeds * 30)
	t.Logf("mean rho %.4f, %d of %d seeds |rho| < 0.15, first tenth's mean drawn place %.1f (middle 149.5)", mean, under, seeds, early)
	if math.Abs(mean) > 0.02 {
		t.Errorf("mean Spearman rho %.4f over %d seeds, want within ±0.02", mean, seeds)
	}
	if under < seeds*97/100 {
		t.Errorf("%d of %d seeds with |rho| < 0.15, want at least 97 %%", under, seeds)
	}
	if math.Abs(early-149.5) > 6 {
		t.Errorf("the first 30 to arrive got mean drawn place %.1f, want 149.5 ± 6", early)
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
