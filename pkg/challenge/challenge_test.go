package challenge

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testKey = bytes.Repeat([]byte("k"), MinKeyBytes)

func newTestSigner(t testing.TB, now *time.Time) *Signer {
	t.Helper()
	s, err := NewSigner(testKey, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return *now }
	return s
}

func TestIssueAndCheck(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	s := newTestSigner(t, &now)
	c, err := s.Issue("sale", "ann", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Value) != encodedLen || strings.Contains(c.Value, ":") || c.Bits != 10 || !c.ExpiresAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("challenge %+v (len %d), want %d characters, no ':', 10 bits, expiring in a minute", c, len(c.Value), encodedLen)
	}
	nonce := Solve(c.Value, 10)
	if LeadingZeroBits(c.Value, nonce) < 10 {
		t.Fatalf("Solve gave %s with %d bits", nonce, LeadingZeroBits(c.Value, nonce))
	}
	p, err := s.Check("sale", "ann", c.Value+":"+nonce)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.ID) != 32 || p.Bits != 10 || !p.ExpiresAt.Equal(c.ExpiresAt) {
		t.Fatalf("proof %+v", p)
	}
	// Two challenges never share an id.
	c2, _ := s.Issue("sale", "ann", 10)
	p2, err := s.Check("sale", "ann", c2.Value+":"+Solve(c2.Value, 10))
	if err != nil || p2.ID == p.ID {
		t.Fatalf("second proof %+v (%v), first id %s", p2, err, p.ID)
	}

	var unsolved string
	for i := 0; ; i++ {
		if n := strconv.Itoa(i); LeadingZeroBits(c.Value, n) < 10 {
			unsolved = n
			break
		}
	}
	other, _ := NewSigner(bytes.Repeat([]byte("o"), MinKeyBytes), time.Minute)
	forged, _ := other.Issue("sale", "ann", 1)
	for _, tc := range []struct {
		name, q, user, solution string
		want                    error
	}{
		{"unsolved", "sale", "ann", c.Value + ":" + unsolved, ErrWork},
		{"another user", "sale", "bob", c.Value + ":" + nonce, ErrForged},
		{"another queue", "sale-2", "ann", c.Value + ":" + nonce, ErrForged},
		{"another key", "sale", "ann", forged.Value + ":" + Solve(forged.Value, 1), ErrForged},
		{"no nonce", "sale", "ann", c.Value, ErrMalformed},
		{"empty nonce", "sale", "ann", c.Value + ":", ErrMalformed},
		{"hex nonce", "sale", "ann", c.Value + ":ff", ErrMalformed},
		{"long nonce", "sale", "ann", c.Value + ":" + strings.Repeat("1", 21), ErrMalformed},
		{"truncated", "sale", "ann", c.Value[1:] + ":" + nonce, ErrMalformed},
		{"empty", "sale", "ann", "", ErrMalformed},
		{"dots", "sale", "ann", strings.Repeat(".", encodedLen) + ":1", ErrMalformed},
	} {
		if _, err := s.Check(tc.q, tc.user, tc.solution); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	// A flipped payload byte (a raised difficulty, a later expiry) breaks
	// the signature.
	tampered := []byte(c.Value)
	tampered[1] ^= 0x01
	if _, err := s.Check("sale", "ann", string(tampered)+":"+nonce); !errors.Is(err, ErrForged) && !errors.Is(err, ErrMalformed) {
		t.Fatalf("tampered challenge: %v", err)
	}

	now = c.ExpiresAt
	if _, err := s.Check("sale", "ann", c.Value+":"+nonce); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
}

func TestSignerRefusesBadSettings(t *testing.T) {
	if _, err := NewSigner([]byte("short"), time.Minute); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	for _, ttl := range []time.Duration{0, time.Millisecond, 2 * time.Hour} {
		if _, err := NewSigner(testKey, ttl); err == nil {
			t.Fatalf("lifetime %s was accepted", ttl)
		}
	}
	s, _ := NewSigner(testKey, time.Minute)
	for _, b := range []int{0, -1, 33} {
		if _, err := s.Issue("q", "u", b); err == nil {
			t.Fatalf("difficulty %d was accepted", b)
		}
	}
	if a, b := DeriveKey("secret-one"), DeriveKey("secret-two"); bytes.Equal(a, b) || len(a) != 32 {
		t.Fatal("derived keys must differ per secret and be 32 bytes")
	}
}

func TestLeadingZeroBits(t *testing.T) {
	// Counted over the whole digest, from the first byte's top bit: a
	// difficulty of b bits is met by about one nonce in 2^b.
	const value = "fixed-challenge"
	hits := map[int]int{}
	const n = 1 << 14
	for i := range n {
		z := LeadingZeroBits(value, strconv.Itoa(i))
		for b := 0; b <= 8; b++ {
			if z >= b {
				hits[b]++
			}
		}
	}
	for b := 0; b <= 8; b++ {
		want := n >> b
		if got := hits[b]; got < want*7/10 || got > want*13/10 {
			t.Errorf("%d bits: %d of %d nonces, want about %d", b, got, n, want)
		}
	}
}

// FuzzCheck: no solution string panics the checker, and none is accepted
// that the fuzzer could not have solved honestly for this key.
func FuzzCheck(f *testing.F) {
	now := time.UnixMilli(1_800_000_000_000)
	s := newTestSigner(f, &now)
	// A fixed id, so every fuzzing process issues the same challenge.
	s.read = func(b []byte) (int, error) { return copy(b, bytes.Repeat([]byte{7}, len(b))), nil }
	c, _ := s.Issue("sale", "ann", 4)
	f.Add(c.Value + ":" + Solve(c.Value, 4))
	f.Add(c.Value + ":0")
	f.Add(c.Value)
	f.Add(":")
	f.Add("")
	f.Add(strings.Repeat("A", encodedLen) + ":1")
	f.Add(strings.Repeat("A", 43) + "." + strings.Repeat("B", 21) + ":99999999999999999999")
	f.Add("\x00\xff:\x00")
	f.Fuzz(func(t *testing.T, solution string) {
		p, err := s.Check("sale", "ann", solution)
		if err != nil {
			return
		}
		value, nonce, _ := strings.Cut(solution, ":")
		if value != c.Value {
			t.Fatalf("accepted %q, which this key never issued", solution)
		}
		if LeadingZeroBits(value, nonce) < p.Bits || p.Bits != 4 {
			t.Fatalf("accepted %q without the work", solution)
		}
	})
}
