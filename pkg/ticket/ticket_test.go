package ticket

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	keyA = bytes.Repeat([]byte("a"), 32)
	keyB = bytes.Repeat([]byte("b"), 32)
)

func signer(t testing.TB, keys ...[]byte) *Signer {
	t.Helper()
	s, err := NewSigner(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignAndCheck(t *testing.T) {
	s := signer(t, keyA)
	p := Place{Generation: 1_764_000_000_123, Seq: 42}
	tk := s.Sign("sale", "alice", p)
	if len(tk) != encodedLen {
		t.Fatalf("ticket %q is %d characters, want %d", tk, len(tk), encodedLen)
	}
	got, err := s.Check("sale", "alice", tk)
	if err != nil || got != p {
		t.Fatalf("Check = %+v, %v; want %+v", got, err, p)
	}
	if strings.Contains(tk, "alice") || strings.Contains(tk, "sale") {
		t.Fatalf("ticket %q spells out its queue or user", tk)
	}
}

func TestRefusals(t *testing.T) {
	s := signer(t, keyA)
	tk := s.Sign("sale", "alice", Place{Generation: 7, Seq: 42})
	other := signer(t, keyB).Sign("sale", "alice", Place{Generation: 7, Seq: 42})
	flip := func(i int) string {
		b := []byte(tk)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	cases := []struct {
		name, q, user, ticket string
		want                  error
	}{
		{"other queue", "sale2", "alice", tk, ErrForged},
		{"other user", "sale", "bob", tk, ErrForged},
		{"other key", "sale", "alice", other, ErrForged},
		{"payload altered", "sale", "alice", flip(12), ErrForged},
		{"mac altered", "sale", "alice", flip(len(tk) - 3), ErrForged},
		{"empty", "sale", "alice", "", ErrMalformed},
		{"no dot", "sale", "alice", strings.Replace(tk, ".", "x", 1), ErrMalformed},
		{"truncated", "sale", "alice", tk[:len(tk)-1], ErrMalformed},
		{"padded", "sale", "alice", tk + "=", ErrMalformed},
		{"non-canonical last char", "sale", "alice", tk[:len(tk)-1] + nonCanonical(tk[len(tk)-1]), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Check(c.q, c.user, c.ticket); !errors.Is(err, c.want) {
				t.Fatalf("Check = %v, want %v", err, c.want)
			}
		})
	}
}

// nonCanonical is another base64url character that decodes to the same
// bytes as c when c ends a 16-byte value (4 unused bits): a lenient decoder
// would accept it.
func nonCanonical(c byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return string(alphabet[i^1])
}

func TestRotation(t *testing.T) {
	old := signer(t, keyA).Sign("sale", "alice", Place{Seq: 9})
	during := signer(t, keyB, keyA)
	if p, err := during.Check("sale", "alice", old); err != nil || p.Seq != 9 {
		t.Fatalf("old key during rotation: %+v, %v", p, err)
	}
	fresh := during.Sign("sale", "alice", Place{Seq: 10})
	if _, err := signer(t, keyA).Check("sale", "alice", fresh); !errors.Is(err, ErrForged) {
		t.Fatalf("a ticket signed with the new key checked by the old key alone: %v, want forged", err)
	}
	after := signer(t, keyB)
	if p, err := after.Check("sale", "alice", fresh); err != nil || p.Seq != 10 {
		t.Fatalf("new key after rotation: %+v, %v", p, err)
	}
	if _, err := after.Check("sale", "alice", old); !errors.Is(err, ErrForged) {
		t.Fatalf("old key after it was dropped: %v, want forged", err)
	}
}

// TestCheckCurrentMovesHoldersToTheFirstKey: a ticket of the first key is
// handed back as it is; one of a later key comes back re-signed with the
// first, for the same place, and that one still passes once the old key is
// dropped; a refused ticket gets no ticket at all.
func TestCheckCurrentMovesHoldersToTheFirstKey(t *testing.T) {
	place := Place{Generation: 7, Seq: 9}
	old := signer(t, keyA).Sign("sale", "alice", place)
	during := signer(t, keyB, keyA)
	fresh := during.Sign("sale", "alice", place)

	p, kept, err := during.CheckCurrent("sale", "alice", fresh)
	if err != nil || p != place || kept != fresh {
		t.Fatalf("first key's ticket: %+v %q %v; want the place and the same ticket", p, kept, err)
	}
	p, moved, err := during.CheckCurrent("sale", "alice", old)
	if err != nil || p != place || moved == old {
		t.Fatalf("second key's ticket: %+v %q %v; want the place and a new ticket", p, moved, err)
	}
	after := signer(t, keyB)
	if p, err := after.Check("sale", "alice", moved); err != nil || p != place {
		t.Fatalf("the re-signed ticket once the old key is dropped: %+v %v", p, err)
	}
	if _, err := after.Check("sale", "alice", old); !errors.Is(err, ErrForged) {
		t.Fatalf("the old ticket once its key is dropped: %v, want forged", err)
	}
	refused := 0
	for _, tk := range []string{old, "garbage", signer(t, keyA).Sign("sale", "bob", place)} {
		if _, got, err := after.CheckCurrent("sale", "alice", tk); err != nil && got == "" {
			refused++
		}
	}
	if refused != 3 {
		t.Fatalf("%d of 3 tickets not issued under the listed keys refused without a ticket", refused)
	}
}

func TestNewSignerRefusesShortKeys(t *testing.T) {
	if _, err := NewSigner(); err == nil {
		t.Fatal("no key accepted")
	}
	if _, err := NewSigner(keyA, keyA[:31]); err == nil {
		t.Fatal("a 31-byte key accepted")
	}
	if a, b := DeriveKey("s"), DeriveKey("t"); len(a) != 32 || bytes.Equal(a, b) {
		t.Fatalf("DeriveKey: %d bytes, equal for two secrets: %v", len(a), bytes.Equal(a, b))
	}
}

// FuzzCheck: no input panics; anything accepted is exactly what was signed
// for that queue and user (a ticket has one spelling).
func FuzzCheck(f *testing.F) {
	s := signer(f, keyA)
	f.Add("sale", "alice", s.Sign("sale", "alice", Place{Generation: 5, Seq: 1}))
	f.Add("sale", "bob", s.Sign("sale", "alice", Place{Seq: 1 << 40}))
	f.Add("q", "u", "AQAAAAAAAAAAAAAAAAAAAAAB.AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("q", "u", "")
	f.Fuzz(func(t *testing.T, q, user, tk string) {
		p, err := s.Check(q, user, tk)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrForged) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if again := s.Sign(q, user, p); again != tk {
			t.Fatalf("accepted %q, which is not the ticket signed for %+v (%q)", tk, p, again)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	s := signer(b, keyA)
	tk := s.Sign("sale", "alice", Place{Generation: 7, Seq: 42})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Check("sale", "alice", tk); err != nil {
			b.Fatal(err)
		}
	}
}
