package auth

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const secret = "auth-test-secret-0123456789abcdef-xyz"

// clock is a settable time source for the cache's expiry checks.
type clock struct{ ns atomic.Int64 }

func newClock() *clock               { c := &clock{}; c.ns.Store(time.Now().UnixNano()); return c }
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

// cached is the number of tokens in the cache.
func (v *Verifier) cached() int {
	if v.cache == nil {
		return 0
	}
	return v.cache.Len()
}

func mint(t testing.TB, v *Verifier, user, role string, ttl time.Duration) string {
	t.Helper()
	tok, err := v.Mint(user, role, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// forged returns tokens that must never verify with secret, whatever is cached.
func forged(t *testing.T, good string) map[string]string {
	t.Helper()
	other, _ := NewVerifier(strings.Repeat("x", MinSecretBytes))
	parts := strings.Split(good, ".")
	sig := []byte(parts[2])
	sig[3] ^= 1 // one bit of the signature
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject: "alice", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	noExp, err := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "alice"}}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.Split(mint(t, other, "alice", RoleAdmin, time.Hour), ".")
	return map[string]string{
		"another secret":       mint(t, other, "alice", "", time.Hour),
		"altered signature":    parts[0] + "." + parts[1] + "." + string(sig),
		"admin claim spliced":  admin[0] + "." + admin[1] + "." + parts[2],
		"alg none":             none,
		"no exp":               noExp,
		"garbage":              "not.a.jwt",
		"good token plus junk": good + "x",
	}
}

func TestVerifyRefusesForgeriesWithAndWithoutTheCache(t *testing.T) {
	for _, size := range []int{0, 16} {
		t.Run(fmt.Sprintf("cache %d", size), func(t *testing.T) {
			v, err := NewVerifier(secret, WithCache(size))
			if err != nil {
				t.Fatal(err)
			}
			good := mint(t, v, "alice", "", time.Hour)
			for range 2 { // the second time from the cache, when there is one
				p, err := v.Verify(good)
				if err != nil || p != (Principal{UserID: "alice"}) {
					t.Fatalf("Verify(good) = %+v, %v; want alice", p, err)
				}
			}
			for name, tok := range forged(t, good) {
				if p, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
					t.Errorf("%s: Verify = %+v, %v; want ErrInvalidToken", name, p, err)
				}
			}
			if _, err := v.Verify(""); !errors.Is(err, ErrMissingToken) {
				t.Errorf("empty token: %v, want ErrMissingToken", err)
			}
			want := 0
			if size > 0 {
				want = 1 // only the good token was ever cached
			}
			if n := v.cached(); n != want {
				t.Fatalf("%d cached tokens, want %d", n, want)
			}
		})
	}
}

func TestCachedTokenExpiresOnTime(t *testing.T) {
	clk := newClock()
	v, err := NewVerifier(secret, WithCache(16), withClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	tok := mint(t, v, "bob", RoleAdmin, 10*time.Second)
	if p, err := v.Verify(tok); err != nil || !p.IsAdmin() {
		t.Fatalf("fresh token: %+v %v", p, err)
	}
	clk.add(14 * time.Second) // past exp, within the 5 s leeway
	if p, err := v.Verify(tok); err != nil || p.UserID != "bob" {
		t.Fatalf("within the leeway: %+v %v, want bob", p, err)
	}
	clk.add(2 * time.Second) // 16 s: past exp plus leeway
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("expired cached token: %v, want ErrInvalidToken", err)
	}
	if n := v.cached(); n != 0 {
		t.Fatalf("%d cached tokens after expiry, want 0", n)
	}
}

func TestCacheIsBounded(t *testing.T) {
	v, err := NewVerifier(secret, WithCache(3))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := v.Verify(mint(t, v, fmt.Sprintf("u%d", i), "", time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.cached(); n != 3 {
		t.Fatalf("%d cached tokens, want the bound 3", n)
	}
	if _, err := NewVerifier(secret, WithCache(-1)); err == nil {
		t.Fatal("a negative cache size was accepted")
	}
}

func TestVerifyConcurrently(t *testing.T) {
	v, err := NewVerifier(secret, WithCache(8)) // smaller than the token set: evictions race with hits
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]string, 32)
	for i := range toks {
		toks[i] = mint(t, v, fmt.Sprintf("user-%02d", i), "", time.Hour)
	}
	bad := forged(t, toks[0])["altered signature"]
	const workers = 16
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range 500 {
				k := (w*7 + i) % len(toks)
				p, err := v.Verify(toks[k])
				if err != nil || p.UserID != fmt.Sprintf("user-%02d", k) {
					errs[w] = fmt.Errorf("token %d: %+v %v", k, p, err)
					return
				}
				if _, err := v.Verify(bad); !errors.Is(err, ErrInvalidToken) {
					errs[w] = fmt.Errorf("forged token: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", w, err)
		}
	}
}

// BenchmarkVerify is one poller's token checked again and again, as the
// position path sees it: the cache turns the HMAC and claims parsing into a
// map lookup.
func BenchmarkVerify(b *testing.B) {
	for _, size := range []int{0, 131072} {
		b.Run(fmt.Sprintf("cache=%d", size), func(b *testing.B) {
			v, err := NewVerifier(secret, WithCache(size))
			if err != nil {
				b.Fatal(err)
			}
			toks := make([]string, 1024)
			for i := range toks {
				toks[i] = mint(b, v, fmt.Sprintf("user-%04d", i), "", time.Hour)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := v.Verify(toks[i%len(toks)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
		})
	}
}
