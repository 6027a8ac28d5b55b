// Package authtest is an identity provider for tests: it publishes a JSON
// Web Key Set over HTTP, the way Keycloak, Auth0, Cognito or Entra do, and
// signs tokens with the keys it holds.
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// Issuer and Audience are what IdP.Claims puts in iss and aud.
const (
	Issuer   = "https://idp.test/realms/shop"
	Audience = "waitingroom"
)

// Key is a signing key and how the set publishes it.
type Key struct {
	Kid string
	// Alg is the JWK's alg; "" publishes none, as Entra does.
	Alg     string
	Method  jwt.SigningMethod
	Private crypto.Signer
}

// RSAKey is a 2048-bit RSA key signing RS256. The key constructors
// panic only if the system's random source fails.
func RSAKey(kid, alg string) *Key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return &Key{Kid: kid, Alg: alg, Method: jwt.SigningMethodRS256, Private: k}
}

// ECKey is a P-256 key signing ES256.
func ECKey(kid, alg string) *Key {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Key{Kid: kid, Alg: alg, Method: jwt.SigningMethodES256, Private: k}
}

// EdKey is an Ed25519 key signing EdDSA.
func EdKey(kid string) *Key {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Key{Kid: kid, Alg: "EdDSA", Method: jwt.SigningMethodEdDSA, Private: k}
}

// Sign returns a token with claims, signed by k with its Method, naming
// k.Kid in the header.
func (k *Key) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	return k.SignWith(t, k.Method, claims)
}

// SignWith is Sign with another algorithm, for tokens that must be refused.
func (k *Key) SignWith(t testing.TB, m jwt.SigningMethod, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	tok.Header["kid"] = k.Kid
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// IdP serves a JWKS at URL and counts its fetches.
type IdP struct {
	URL string

	fetches atomic.Int64
	down    atomic.Bool
	mu      sync.Mutex
	keys    []*Key
}

// NewIdP starts an IdP publishing keys; it stops with the test.
func NewIdP(t testing.TB, keys ...*Key) *IdP {
	t.Helper()
	p := &IdP{keys: keys}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + "/certs"
	return p
}

// Publish replaces the published keys (a rotation).
func (p *IdP) Publish(keys ...*Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = keys
}

// SetDown makes the set answer 503 (true) or the keys again (false).
func (p *IdP) SetDown(down bool) { p.down.Store(down) }

// Fetches is how many times the set was requested.
func (p *IdP) Fetches() int64 { return p.fetches.Load() }

// document is the published JWKS.
func (p *IdP) document() (jwkset.JWKSMarshal, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, k := range p.keys {
		j, err := jwkset.NewJWKFromKey(k.Private.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.Kid, ALG: jwkset.ALG(k.Alg), USE: jwkset.UseSig},
		})
		if err != nil {
			return set, err
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	return set, nil
}

func (p *IdP) serve(w http.ResponseWriter, r *http.Request) {
	p.fetches.Add(1)
	if p.down.Load() || r.URL.Path != "/certs" {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	set, err := p.document()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	_ = json.NewEncoder(w).Encode(set)
}

// Claims are valid claims for sub: this IdP's issuer and audience, issued
// now, valid for an hour.
func Claims(sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"sub": sub, "iss": Issuer, "aud": Audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}
