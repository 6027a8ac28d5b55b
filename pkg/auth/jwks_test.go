package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/waitingroom/waitingroom/pkg/auth/authtest"
	"github.com/waitingroom/waitingroom/pkg/config"
)

// testKeys are generated once: RSA key generation is slow under -race.
var testKeys = sync.OnceValue(func() map[string]*authtest.Key {
	return map[string]*authtest.Key{
		"rsa":       authtest.RSAKey("rsa-1", "RS256"),
		"rsa-noalg": authtest.RSAKey("rsa-entra", ""), // Entra publishes no alg
		"rsa-2":     authtest.RSAKey("rsa-2", "RS256"),
		"ec":        authtest.ECKey("ec-1", "ES256"),
		"ec-noalg":  authtest.ECKey("ec-2", ""),
		"ed":        authtest.EdKey("ed-1"),
	}
})

func key(name string) *authtest.Key { return testKeys()[name] }

// jwksVerifier verifies tokens from p, waits until its keys are fetched,
// and is closed with the test.
func jwksVerifier(t *testing.T, p *authtest.IdP, secret string, opts ...Option) *Verifier {
	t.Helper()
	opts = append([]Option{
		WithJWKS(context.Background(), JWKS{URL: p.URL, Refresh: time.Hour}),
		WithIssuer(authtest.Issuer), WithAudience(authtest.Audience), WithCache(64),
	}, opts...)
	v, err := NewVerifier(secret, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	waitReady(t, v)
	return v
}

func waitReady(t *testing.T, v *Verifier) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for v.Ready(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("JWKS not fetched after 15 s: %v", v.Ready(context.Background()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJWKSTokensAreAccepted(t *testing.T) {
	p := authtest.NewIdP(t, key("rsa"), key("rsa-noalg"), key("ec"), key("ec-noalg"), key("ed"))
	v := jwksVerifier(t, p, "")
	for _, name := range []string{"rsa", "rsa-noalg", "ec", "ec-noalg", "ed"} {
		k := key(name)
		user := "user-" + name
		tok := k.Sign(t, authtest.Claims(user))
		for range 2 { // the second time from the cache
			if got, err := v.Verify(tok); err != nil || got != (Principal{UserID: user}) {
				t.Errorf("%s (%s): Verify = %+v, %v; want %s", name, k.Method.Alg(), got, err, user)
			}
		}
	}
	admin, err := v.Verify(key("ec").Sign(t, authtest.With(authtest.Claims("ops"), "role", RoleAdmin)))
	if err != nil || !admin.IsAdmin() {
		t.Fatalf("admin token: %+v %v", admin, err)
	}
	if n := p.Fetches(); n != 1 {
		t.Fatalf("%d JWKS fetches, want 1: known kids never fetch again", n)
	}
	if n := v.cached(); n != 6 {
		t.Fatalf("%d cached tokens, want 6", n)
	}
}

// badTokens are authtest.BadTokens plus a key of one type named for a
// token of another.
func badTokens(t *testing.T) map[string]string {
	t.Helper()
	bad := authtest.BadTokens(t, key("rsa"), key("rsa-2"))
	good := authtest.Claims("mallory")
	bad["RS256 token, EC kid"] = (&authtest.Key{Kid: key("ec").Kid, Private: key("rsa").Private}).SignWith(t, jwt.SigningMethodRS256, good)
	bad["EdDSA token, RSA kid"] = (&authtest.Key{Kid: key("rsa").Kid, Private: key("ed").Private}).SignWith(t, jwt.SigningMethodEdDSA, good)
	bad["ES256 token, EdDSA kid"] = (&authtest.Key{Kid: key("ed").Kid, Private: key("ec").Private}).SignWith(t, jwt.SigningMethodES256, good)
	return bad
}

func TestJWKSRefusesBadTokens(t *testing.T) {
	p := authtest.NewIdP(t, key("rsa"), key("ec"), key("ed"))
	for _, secret := range []string{"", secret} {
		t.Run(fmt.Sprintf("secret=%t", secret != ""), func(t *testing.T) {
			v := jwksVerifier(t, p, secret)
			fetched := p.Fetches()
			for name, tok := range badTokens(t) {
				if got, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
					t.Errorf("%s: Verify = %+v, %v; want ErrInvalidToken", name, got, err)
				}
			}
			if n := v.cached(); n != 0 {
				t.Fatalf("%d refused tokens cached, want 0", n)
			}
			// "unknown key" may fetch the set once; the others never do.
			if n := p.Fetches() - fetched; n > 1 {
				t.Fatalf("%d fetches for the bad tokens, want at most 1", n)
			}
			if _, err := v.Verify(key("rsa").Sign(t, authtest.Claims("alice"))); err != nil {
				t.Fatalf("the good token after the bad ones: %v", err)
			}
		})
	}
}

func TestJWKSRotationIsPickedUpAndUnknownKidsAreRateLimited(t *testing.T) {
	clk := newClock()
	p := authtest.NewIdP(t, key("rsa"))
	v := jwksVerifier(t, p, "", withClock(clk.now))
	old := key("rsa").Sign(t, authtest.Claims("alice"))
	if _, err := v.Verify(old); err != nil {
		t.Fatal(err)
	}
	p.Publish(key("rsa"), key("rsa-2")) // the provider rotates in a new key
	if got, err := v.Verify(key("rsa-2").Sign(t, authtest.Claims("bob"))); err != nil || got.UserID != "bob" {
		t.Fatalf("token with the new kid: %+v %v", got, err)
	}
	if n := p.Fetches(); n != 2 {
		t.Fatalf("%d fetches, want 2 (start, then the new kid)", n)
	}
	// 50 tokens with unknown kids, concurrently: refused, and no fetch,
	// because the new kid's fetch was less than UnknownKIDInterval ago.
	errs := unknownKids(t, v, 50)
	for i, err := range errs {
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("unknown kid %d: %v, want ErrInvalidToken", i, err)
		}
	}
	if n := p.Fetches(); n != 2 {
		t.Fatalf("%d fetches after 50 unknown kids, want still 2", n)
	}
	clk.add(UnknownKIDInterval)
	unknownKids(t, v, 50)
	if n := p.Fetches(); n != 3 {
		t.Fatalf("%d fetches after the interval and 50 more unknown kids, want 3", n)
	}
	if _, err := v.Verify(old); err != nil {
		t.Fatalf("the old key's token after the rotation: %v", err)
	}
}

func TestJWKSUnknownKidsFromTheStartFetchOnce(t *testing.T) {
	p := authtest.NewIdP(t, key("ec"))
	v := jwksVerifier(t, p, "")
	unknownKids(t, v, 50)
	if n := p.Fetches(); n != 2 {
		t.Fatalf("%d fetches for 50 concurrent unknown kids, want 2 (start, then one for all)", n)
	}
}

// unknownKids verifies n tokens, each with its own unknown kid, at once.
func unknownKids(t *testing.T, v *Verifier, n int) []error {
	t.Helper()
	toks := make([]string, n)
	for i := range toks {
		toks[i] = (&authtest.Key{Kid: fmt.Sprintf("junk-%d", i), Private: key("ec").Private}).
			SignWith(t, jwt.SigningMethodES256, authtest.Claims("eve"))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, tok := range toks {
		wg.Go(func() { _, errs[i] = v.Verify(tok) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("unknown kid %d: %v, want ErrInvalidToken", i, err)
		}
	}
	return errs
}

func TestJWKSRemovedKeyEndsItsCachedTokens(t *testing.T) {
	p := authtest.NewIdP(t, key("rsa"), key("ec"))
	v, err := NewVerifier("", WithJWKS(context.Background(), JWKS{URL: p.URL, Refresh: 20 * time.Millisecond}),
		WithIssuer(authtest.Issuer), WithAudience(authtest.Audience), WithCache(64))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	waitReady(t, v)
	rsaTok, ecTok := key("rsa").Sign(t, authtest.Claims("alice")), key("ec").Sign(t, authtest.Claims("bob"))
	for _, tok := range []string{rsaTok, ecTok} {
		if _, err := v.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	// A failing provider changes nothing: the keys fetched stay in use.
	p.SetDown(true)
	waitFetches(t, p, p.Fetches()+2)
	if _, err := v.Verify(rsaTok); err != nil {
		t.Fatalf("cached token while the JWKS is down: %v", err)
	}
	p.SetDown(false)
	p.Publish(key("ec")) // rsa-1 revoked
	waitFetches(t, p, p.Fetches()+2)
	if _, err := v.Verify(rsaTok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("cached token of a revoked key: %v, want ErrInvalidToken", err)
	}
	if _, err := v.Verify(ecTok); err != nil {
		t.Fatalf("cached token of a kept key: %v", err)
	}
	if n := v.cached(); n != 1 {
		t.Fatalf("%d cached tokens, want 1 (the EC one)", n)
	}
}

func waitFetches(t *testing.T, p *authtest.IdP, n int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for p.Fetches() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d JWKS fetches after 15 s, want %d", p.Fetches(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestJWKSUnreachableAtStart(t *testing.T) {
	p := authtest.NewIdP(t, key("rsa"))
	p.SetDown(true)
	v, err := NewVerifier("", WithJWKS(context.Background(), JWKS{URL: p.URL, Refresh: time.Hour}),
		WithIssuer(authtest.Issuer), WithAudience(authtest.Audience))
	if err != nil {
		t.Fatalf("NewVerifier with the JWKS down: %v", err)
	}
	defer v.Close()
	waitFetches(t, p, 1)
	// The IdP counts the fetch before the verifier has its answer: on a
	// busy machine Ready may still say "not fetched yet" for a moment,
	// never ready.
	err = v.Ready(context.Background())
	for deadline := time.Now().Add(10 * time.Second); err != nil && !strings.Contains(err.Error(), "status 503") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		err = v.Ready(context.Background())
	}
	if err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("Ready with the JWKS down = %v, want the 503", err)
	}
	tok := key("rsa").Sign(t, authtest.Claims("alice"))
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify with no keys yet: %v, want ErrInvalidToken", err)
	}
	p.SetDown(false) // the background retries (1 s, 2 s, ...) find it
	waitReady(t, v)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("Verify once the keys arrived: %v", err)
	}
}

func TestJWKSFetchesStopWithCloseAndWithTheContext(t *testing.T) {
	for _, how := range []string{"Close", "context"} {
		t.Run(how, func(t *testing.T) {
			p := authtest.NewIdP(t, key("ed"))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			v, err := FromConfig(ctx, config.Auth{JWKSURL: p.URL, JWKSRefresh: 5 * time.Millisecond,
				Issuer: authtest.Issuer, Audience: []string{authtest.Audience}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			waitFetches(t, p, 3)
			if how == "Close" {
				v.Close()
			} else {
				cancel()
				<-v.keys.stopped
			}
			// A request the stopped fetcher had already sent may still
			// reach the server: count from when it has landed.
			time.Sleep(50 * time.Millisecond)
			n := p.Fetches()
			time.Sleep(100 * time.Millisecond)
			if m := p.Fetches(); m != n {
				t.Fatalf("%d fetches after the stop, want 0", m-n)
			}
			v.Close() // a second Close is harmless
		})
	}
}

func TestHS256AndJWKSTogether(t *testing.T) {
	p := authtest.NewIdP(t, key("rsa"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []config.Auth{
		{JWTSecret: secret, JWKSURL: p.URL, Issuer: authtest.Issuer, Audience: []string{authtest.Audience, "admin-ui"}},
		{DevMode: true, JWKSURL: p.URL, Issuer: authtest.Issuer, Audience: []string{authtest.Audience, "admin-ui"}},
	} {
		v, err := FromConfig(ctx, c, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitReady(t, v)
		minted := mint(t, v, "alice", RoleAdmin, time.Hour) // carries iss and aud
		if p, err := v.Verify(minted); err != nil || !p.IsAdmin() {
			t.Fatalf("dev=%t: minted HS256 token: %+v %v", c.DevMode, p, err)
		}
		if p, err := v.Verify(key("rsa").Sign(t, authtest.Claims("bob"))); err != nil || p.UserID != "bob" {
			t.Fatalf("dev=%t: RS256 token: %+v %v", c.DevMode, p, err)
		}
		hmacKey := c.JWTSecret
		if c.DevMode {
			hmacKey = DevSecret
		}
		bare, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(hmacKey))
		if _, err := v.Verify(bare); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("dev=%t: HS256 token without iss and aud: %v, want ErrInvalidToken", c.DevMode, err)
		}
		v.Close()
	}
}

func TestPinRefusesKeysThatCannotBePinned(t *testing.T) {
	rsaJWK := func(alg, use string) string {
		pub := key("rsa").Private.Public().(*rsa.PublicKey)
		return fmt.Sprintf(`{"kty":"RSA","kid":"k","alg":%q,"use":%q,"n":%q,"e":"AQAB"}`, alg, use,
			base64.RawURLEncoding.EncodeToString(pub.N.Bytes()))
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"RSA for RSA-OAEP": rsaJWK("RSA-OAEP", ""),
		"RSA for HS256":    rsaJWK("HS256", ""),
		"RSA for ES256":    rsaJWK("ES256", ""),
		"RSA for enc":      rsaJWK("", "enc"),
		"no kid":           strings.Replace(rsaJWK("RS256", "sig"), `"kid":"k",`, "", 1),
		"oct":              `{"kty":"oct","kid":"k","alg":"HS256","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}`,
	}
	tests["RSA 1024"] = fmt.Sprintf(`{"kty":"RSA","kid":"k","n":%q,"e":"AQAB"}`, base64.RawURLEncoding.EncodeToString(small.N.Bytes()))
	for name, raw := range tests {
		var m jwkset.JWKMarshal
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if k, err := pin(m); err == nil {
			t.Errorf("%s: pinned to %s, want refused", name, k.alg)
		}
	}
	var m jwkset.JWKMarshal
	_ = json.Unmarshal([]byte(rsaJWK("PS256", "sig")), &m)
	if k, err := pin(m); err != nil || k.alg != "PS256" {
		t.Fatalf("RSA for PS256: %+v %v, want PS256", k, err)
	}
}
