package queue

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"testing"
)

func mustKey(t *testing.T) LineKey {
	t.Helper()
	s, err := NewLineKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseLineKey(s)
	if err != nil || len(k) != LineKeyBytes {
		t.Fatalf("parse %q: %v", s, err)
	}
	return k
}

// TestLineOfIsKeyed: under a key, a user's line is the same every time;
// under another key, many users are in other lines; and the keyed line is
// not the unkeyed FNV-1a one anyone can compute (it agrees with it about
// one time in shards, as two independent hashes do).
func TestLineOfIsKeyed(t *testing.T) {
	const users, shards = 30_000, 3
	a, b := mustKey(t), mustKey(t)
	moved, likeFNV := 0, 0
	for i := range users {
		u := fmt.Sprintf("user-%d", i)
		line := LineOf(a, u, shards)
		if again := LineOf(a, u, shards); again != line {
			t.Fatalf("%s: line %d, then %d under the same key", u, line, again)
		}
		if LineOf(b, u, shards) != line {
			moved++
		}
		h := fnv.New32a()
		h.Write([]byte(u))
		if int(h.Sum32()%shards) == line {
			likeFNV++
		}
	}
	// Independent: two thirds differ (sd about 82 of 30,000).
	for name, got := range map[string]int{"another key": moved, "FNV-1a": users - likeFNV} {
		if want := users * (shards - 1) / shards; math.Abs(float64(got-want)) > 600 {
			t.Errorf("%d of %d users in another line under %s, want about %d", got, users, name, want)
		}
	}
	t.Logf("of %d users, %d in another line under another key, %d in the line FNV-1a would give", users, moved, likeFNV)
}

// TestLineOfSpreadsEvenly: every line gets its share of 64,000 users within
// five standard deviations of the binomial, for several line counts.
func TestLineOfSpreadsEvenly(t *testing.T) {
	key := mustKey(t)
	for _, shards := range []int{2, 3, 7, 64} {
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			const users = 64_000
			per := make([]int, shards)
			for i := range users {
				per[LineOf(key, fmt.Sprintf("u%06d", i), shards)]++
			}
			p := 1 / float64(shards)
			mean, sd := users*p, math.Sqrt(users*p*(1-p))
			for line, n := range per {
				if math.Abs(float64(n)-mean) > 5*sd {
					t.Errorf("line %d of %d has %d users, want %.0f +- %.0f", line, shards, n, mean, 5*sd)
				}
			}
		})
	}
}

// TestLineOfWithoutAKeyIsTheOldHash: a queue split before keys existed
// keeps its people where they are.
func TestLineOfWithoutAKeyIsTheOldHash(t *testing.T) {
	for _, tc := range []struct {
		user   string
		shards int
	}{{"alice", 3}, {"bob", 3}, {"carol", 7}, {"u000123", 64}, {"anyone", 1}} {
		h := fnv.New32a()
		h.Write([]byte(tc.user))
		if got, want := LineOf(nil, tc.user, tc.shards), int(h.Sum32()%uint32(tc.shards)); got != want {
			t.Errorf("LineOf(nil, %q, %d) = %d, want %d", tc.user, tc.shards, got, want)
		}
	}
}

// TestLineKeyNeverPrints: the key is redacted in every form a log or a
// view could show it.
func TestLineKeyNeverPrints(t *testing.T) {
	key := mustKey(t)
	hexKey := fmt.Sprintf("%x", []byte(key))
	js, err := json.Marshal(struct{ K LineKey }{key})
	if err != nil {
		t.Fatal(err)
	}
	f := Frontier{QueueID: "q", Shards: 3, LineKey: key}
	for name, s := range map[string]string{
		"%v": fmt.Sprintf("%v", key), "%s": fmt.Sprintf("%s", key), "%x": fmt.Sprintf("%x", key),
		"%#v": fmt.Sprintf("%#v", key), "json": string(js), "frontier %+v": fmt.Sprintf("%+v", f),
	} {
		if strings.Contains(s, hexKey) || strings.Contains(s, string(key)) || !strings.Contains(s, "redacted") {
			t.Errorf("%s shows %q", name, s)
		}
	}
}

func TestParseLineKey(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantLen int
		wantErr bool
	}{
		{"", 0, false},
		{strings.Repeat("ab", LineKeyBytes), LineKeyBytes, false},
		{strings.Repeat("ab", LineKeyBytes-1), 0, true},
		{strings.Repeat("zz", LineKeyBytes), 0, true},
	} {
		k, err := ParseLineKey(tc.in)
		if (err != nil) != tc.wantErr || len(k) != tc.wantLen {
			t.Errorf("ParseLineKey(%q) = %d bytes, %v", tc.in, len(k), err)
		}
	}
}
