package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// FuzzMintUserID: a token is minted exactly for the ids the user id rule
// (queue.ValidUserID, fuzzed in pkg/queue) accepts, and verifies back to
// the same id; a refused id cannot be minted, so no token carries one.
func FuzzMintUserID(f *testing.F) {
	for _, s := range []string{
		"alice", "user@example.com", "a|b", strings.Repeat("U", 128), strings.Repeat("U", 129),
		"", "al ice", "{alice}", "ålice", "alice\x00", "a/b",
	} {
		f.Add(s)
	}
	v, err := NewVerifier(secret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, id string) {
		ok := queue.ValidUserID(id)
		if ValidUserID(id) != ok {
			t.Fatalf("auth.ValidUserID(%q) = %v, queue.ValidUserID says %v", id, !ok, ok)
		}
		tok, err := v.Mint(id, "", time.Hour)
		if !ok {
			if err == nil {
				t.Fatalf("Mint(%q) made a token for an invalid user id", id)
			}
			return
		}
		if err != nil {
			t.Fatalf("Mint(%q): %v", id, err)
		}
		p, err := v.Verify(tok)
		if err != nil || p.UserID != id {
			t.Fatalf("minted for %q, verified as %+v (%v)", id, p, err)
		}
	})
}

// asciiFold reports whether s begins with prefix, ASCII letters compared
// without case and nothing else folded.
func asciiFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		a, b := s[i], prefix[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// respell spells tok's signature another way: its last character with
// the lowest (unused) bit flipped. Decoding is strict, so it is refused.
func respell(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(alphabet[i^1])
}

// FuzzBearer: the Authorization header's bearer credentials. bearer takes
// the credentials of the Bearer scheme (any case, RFC 9110) and nothing
// else, with no surrounding space, and is idempotent; through the
// middleware, a request gets past only with the minted token itself, and
// every refusal is a 401 problem with a WWW-Authenticate challenge that the
// handler behind never saw, the other spellings of the token's signature
// (base64url's unused last bits) included.
func FuzzBearer(f *testing.F) {
	// A token made at a fixed time, read by a verifier whose clock stays
	// there: inputs the fuzzer keeps hold the same valid token forever.
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v, err := NewVerifier(secret, func(v *Verifier) error { v.now = func() time.Time { return at }; return nil })
	if err != nil {
		f.Fatal(err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{RegisteredClaims: jwt.RegisteredClaims{
		Subject: "alice", IssuedAt: jwt.NewNumericDate(at), ExpiresAt: jwt.NewNumericDate(at.Add(time.Hour)),
	}}).SignedString([]byte(secret))
	if err != nil {
		f.Fatal(err)
	}
	if p, err := v.Verify(tok); err != nil || p.UserID != "alice" {
		f.Fatalf("the fixed token does not verify: %+v %v", p, err)
	}
	for _, s := range []string{
		"Bearer " + tok, "bearer " + tok, "BEARER " + tok, "Bearer   " + tok + " \t", "Bearer\t" + tok, "Bearer" + tok,
		"Basic " + tok, tok, "", "Bearer ", "Bearer  ", "Bearer " + tok + " " + tok, "Bearer " + tok + "\x00",
		"Bearer " + respell(tok), "Bearer " + strings.ToUpper(tok), "Bearer \u00a0" + tok, "Beare\u0280 " + tok, "Bearer " + tok[:len(tok)-1],
	} {
		f.Add(s)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	var reached int
	e.GET("/", v.Middleware(false), func(c *gin.Context) {
		reached++
		p, _ := FromContext(c)
		c.String(http.StatusOK, p.UserID)
	})
	f.Fuzz(func(t *testing.T, h string) {
		got := bearer(h)
		scheme := asciiFold(h, "bearer ")
		rest := ""
		if scheme {
			rest = strings.TrimSpace(h[len("bearer "):])
		}
		if got != rest {
			t.Fatalf("bearer(%q) = %q, want %q", h, got, rest)
		}
		if got != "" {
			first, _ := utf8.DecodeRuneInString(got)
			last, _ := utf8.DecodeLastRuneInString(got)
			if unicode.IsSpace(first) || unicode.IsSpace(last) {
				t.Fatalf("bearer(%q) = %q keeps surrounding space", h, got)
			}
			if again := bearer("Bearer " + got); again != got {
				t.Fatalf("bearer is not idempotent: %q then %q", got, again)
			}
		}

		reached = 0
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header["Authorization"] = []string{h}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if got == tok {
			if rec.Code != http.StatusOK || rec.Body.String() != "alice" || reached != 1 {
				t.Fatalf("the minted token in %q: %d %q, handler ran %d times", h, rec.Code, rec.Body, reached)
			}
			return
		}
		if rec.Code != http.StatusUnauthorized || reached != 0 {
			t.Fatalf("header %q: status %d, handler ran %d times; want 401 and never", h, rec.Code, reached)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Fatalf("header %q: 401 as %q", h, ct)
		}
		if rec.Header().Get("WWW-Authenticate") == "" {
			t.Fatalf("header %q: 401 without WWW-Authenticate", h)
		}
	})
}
