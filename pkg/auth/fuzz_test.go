package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitingroom/waitingroom/pkg/auth/authtest"
)

// FuzzVerify feeds Verify arbitrary tokens: it must never panic, and must
// accept a token only when its signature checks out, independently of
// Verify's own code, against the test's HS256 secret or the JWKS key its
// kid names with that key's algorithm.
func FuzzVerify(f *testing.F) {
	keys := []*authtest.Key{key("rsa"), key("ec"), key("ed")}
	idp := authtest.NewIdP(f, keys...)
	v, err := NewVerifier(secret, WithJWKS(context.Background(), JWKS{URL: idp.URL, Refresh: time.Hour}),
		WithIssuer(authtest.Issuer), WithAudience(authtest.Audience), WithCache(64))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(v.Close)
	for v.Ready(context.Background()) != nil {
		time.Sleep(10 * time.Millisecond)
	}

	minted, err := v.Mint("alice", RoleAdmin, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	huge := `{"alg":"RS256","kid":"` + strings.Repeat("k", 64<<10) + `"}`
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	seeds := []string{
		minted,
		key("rsa").Sign(f, authtest.Claims("bob")),
		key("ec").Sign(f, authtest.Claims("carol")),
		key("ed").Sign(f, authtest.Claims("dave")),
		"", "junk", "a.b.c", "..", "....", strings.Repeat(".", 1000),
		b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + b64([]byte(`{"sub":"alice","exp":9999999999}`)) + ".",
		b64([]byte(huge)) + "." + b64([]byte(`{"sub":"alice"}`)) + ".c2ln",
		b64([]byte(deep)) + ".e30.c2ln",
		b64([]byte(`{"alg":"HS256","kid":["a"]}`)) + ".e30.c2ln",
		b64([]byte(`{"alg":"HS256","alg":"RS256","kid":"rsa-1"}`)) + ".e30.c2ln",
	}
	for _, tok := range authtest.BadTokens(f, key("rsa"), key("rsa-2")) {
		seeds = append(seeds, tok)
	}
	for _, s := range seeds {
		f.Add(s)
	}

	byKid := map[string]*authtest.Key{}
	for _, k := range keys {
		byKid[k.Kid] = k
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := v.Verify(raw)
		if err != nil {
			return
		}
		if !signedByTestKey(raw, byKid) {
			t.Fatalf("Verify accepted %q (%+v), which no test key signed", raw, p)
		}
		if !ValidUserID(p.UserID) {
			t.Fatalf("Verify accepted user id %q", p.UserID)
		}
	})
}

// signedByTestKey checks raw's signature the way RFC 7515 says, apart from
// the Verifier: HS256 with the secret, or the kid's key with its own alg.
func signedByTestKey(raw string, byKid map[string]*authtest.Key) bool {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return false
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	var hdr map[string]any
	if json.Unmarshal(hb, &hdr) != nil {
		return false
	}
	alg, _ := hdr["alg"].(string)
	kid, _ := hdr["kid"].(string)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	var k any
	switch k2 := byKid[kid]; {
	case alg == "HS256":
		k = []byte(secret)
	case k2 != nil && k2.Method.Alg() == alg:
		k = k2.Private.Public()
	default:
		return false
	}
	m := jwt.GetSigningMethod(alg)
	return m != nil && m.Verify(parts[0]+"."+parts[1], sig, k) == nil
}
