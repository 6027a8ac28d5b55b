package grant_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

var (
	oldKey = []byte(strings.Repeat("o", 32))
	newKey = []byte(strings.Repeat("n", 32))
)

func signer(t *testing.T, keys ...[]byte) *grant.Signer {
	t.Helper()
	s, err := grant.NewSigner(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every signed grant checks for its queue and line, with its id and time;
// 1,000 of them have 1,000 ids and secrets.
func TestSignedGrantsCheck(t *testing.T) {
	s := signer(t, newKey)
	at := time.UnixMilli(1_790_000_000_123).UTC()
	for _, line := range []int{0, 1, 63} {
		gs, err := s.Grants("sale", line, 1000, at)
		if err != nil {
			t.Fatal(err)
		}
		ids, secrets := map[string]bool{}, map[string]bool{}
		for _, g := range gs {
			secret, id := queue.LineToken(line, g.Secret), queue.LineToken(line, g.TokenID)
			v, err := s.Check("sale", secret)
			if err != nil || v.TokenID != id || !v.IssuedAt.Equal(at) {
				t.Fatalf("line %d: Check = %+v %v, want %s at %v", line, v, err, id, at)
			}
			ids[id], secrets[secret] = true, true
			if len(secret) > 128 {
				t.Fatalf("secret of %d bytes: the order path refuses tokens over 128", len(secret))
			}
		}
		if len(ids) != 1000 || len(secrets) != 1000 {
			t.Fatalf("line %d: %d ids and %d secrets of 1000 grants", line, len(ids), len(secrets))
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	s := signer(t, newKey)
	g, err := s.Grants("sale", 2, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good := queue.LineToken(2, g[0].Secret)
	unsigned, _ := queue.Grants(1)
	raw, err := base64.RawURLEncoding.DecodeString(g[0].Secret)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 1 // one bit of the tag
	flipped := queue.LineToken(2, base64.RawURLEncoding.EncodeToString(raw))
	for _, tc := range []struct {
		name, q, secret string
		want            error
	}{
		{"another queue", "other", good, grant.ErrForged},
		{"another line", "sale", queue.LineToken(3, g[0].Secret), grant.ErrForged},
		{"line 0", "sale", g[0].Secret, grant.ErrForged},
		{"a bit flipped", "sale", string(flipped), grant.ErrForged},
		{"another key", "sale", queue.LineToken(2, mustGrant(t, signer(t, oldKey))), grant.ErrForged},
		{"unsigned token", "sale", unsigned[0].Secret, grant.ErrUnsigned},
		{"junk", "sale", "not-a-token", grant.ErrUnsigned},
		{"empty", "sale", "", grant.ErrUnsigned},
		{"too long", "sale", good + "A", grant.ErrUnsigned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Check(tc.q, tc.secret); !errors.Is(err, tc.want) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
		})
	}
}

func mustGrant(t *testing.T, s *grant.Signer) string {
	g, err := s.Grants("sale", 2, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return g[0].Secret
}

// A rotation: tokens of the old key check while it is second; once dropped
// they are forged.
func TestKeysRotate(t *testing.T) {
	old := mustGrant(t, signer(t, oldKey))
	if _, err := signer(t, newKey, oldKey).Check("sale", queue.LineToken(2, old)); err != nil {
		t.Fatalf("old key second: %v", err)
	}
	if _, err := signer(t, newKey).Check("sale", queue.LineToken(2, old)); !errors.Is(err, grant.ErrForged) {
		t.Fatalf("old key dropped: %v, want forged", err)
	}
}

func TestSettings(t *testing.T) {
	if s, err := grant.FromSettings(nil); s != nil || err != nil {
		t.Fatalf("no keys: %v %v, want no signer", s, err)
	}
	if _, err := grant.FromSettings([]string{"short"}); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	var none *grant.Signer
	gs, err := none.Grants("sale", 0, 3, time.Now())
	if err != nil || len(gs) != 3 {
		t.Fatalf("unsigned grants: %d %v", len(gs), err)
	}
	if _, err := none.Check("sale", gs[0].Secret); !errors.Is(err, grant.ErrUnsigned) {
		t.Fatalf("no signer checks %v, want unsigned", err)
	}
}
