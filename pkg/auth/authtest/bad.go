package authtest

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// BadTokens are tokens a verifier must refuse when it trusts this IdP's
// Issuer and Audience, a 24 h maximum lifetime and a set in which rsaKey
// (an RSA key pinned to RS256) is published and unknown is not. Each names
// what is wrong with it.
func BadTokens(t testing.TB, rsaKey, unknown *Key) map[string]string {
	t.Helper()
	good := Claims("mallory")
	now := time.Now()
	y2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	pub := rsaKey.Private.Public().(*rsa.PublicKey)
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pkixPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	pkcs1PEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)})
	b64 := base64.RawURLEncoding.EncodeToString
	n := b64(pub.N.Bytes())
	jwk, err := json.Marshal(map[string]string{"kty": "RSA", "kid": rsaKey.Kid, "alg": "RS256", "n": n, "e": "AQAB"})
	if err != nil {
		t.Fatal(err)
	}
	// hs is HMAC-SHA256 keyed with public material: alg confusion.
	hs := func(hmacKey []byte, kid string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, good)
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(hmacKey)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noKid, err := jwt.NewWithClaims(jwt.SigningMethodRS256, good).SignedString(rsaKey.Private)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	impostor := &Key{Kid: rsaKey.Kid, Private: unknown.Private}
	return map[string]string{
		"signed by an unknown key":          unknown.SignWith(t, jwt.SigningMethodRS256, good),
		"another key under a known kid":     impostor.SignWith(t, jwt.SigningMethodRS256, good),
		"alg none":                          b64([]byte(`{"alg":"none","typ":"JWT","kid":"`+rsaKey.Kid+`"}`)) + "." + b64(claims) + ".",
		"HS256 keyed with the PKIX PEM":     hs(pkixPEM, rsaKey.Kid),
		"HS256 keyed with the PKCS1 PEM":    hs(pkcs1PEM, rsaKey.Kid),
		"HS256 keyed with the modulus":      hs(pub.N.Bytes(), rsaKey.Kid),
		"HS256 keyed with the JWK n":        hs([]byte(n), rsaKey.Kid),
		"HS256 keyed with the JWK":          hs(jwk, rsaKey.Kid),
		"HS256 keyed with the PEM, no kid":  hs(pkixPEM, ""),
		"PS256 on an RS256 key":             rsaKey.SignWith(t, jwt.SigningMethodPS256, good),
		"RS512 on an RS256 key":             rsaKey.SignWith(t, jwt.SigningMethodRS512, good),
		"no kid":                            noKid,
		"wrong iss":                         rsaKey.Sign(t, With(good, "iss", "evil")),
		"no iss":                            rsaKey.Sign(t, With(good, "iss", nil)),
		"wrong aud":                         rsaKey.Sign(t, With(good, "aud", "other-app")),
		"no aud":                            rsaKey.Sign(t, With(good, "aud", nil)),
		"25 h lifetime":                     rsaKey.Sign(t, With(good, "iat", now.Add(-time.Hour).Unix(), "exp", now.Add(24*time.Hour).Unix())),
		"25 h lifetime, no iat":             rsaKey.Sign(t, With(good, "iat", nil, "exp", now.Add(25*time.Hour).Unix())),
		"exp 2100":                          rsaKey.Sign(t, With(good, "exp", y2100)),
		"exp 2100, iss evil, aud other-app": rsaKey.Sign(t, With(good, "iss", "evil", "aud", "other-app", "exp", y2100)),
		"expired":                           rsaKey.Sign(t, With(good, "iat", now.Add(-2*time.Hour).Unix(), "exp", now.Add(-time.Hour).Unix())),
		"not valid yet":                     rsaKey.Sign(t, With(good, "nbf", now.Add(time.Hour).Unix(), "exp", now.Add(2*time.Hour).Unix())),
		"no exp":                            rsaKey.Sign(t, With(good, "exp", nil)),
		"sub not a user id":                 rsaKey.Sign(t, With(good, "sub", "a b/../c")),
		"garbage":                           "not.a.jwt",
	}
}

// With returns a copy of c with the given claims set, or removed when
// their value is nil: With(c, "iss", "evil", "aud", nil).
func With(c jwt.MapClaims, kv ...any) jwt.MapClaims {
	out := make(jwt.MapClaims, len(c)+len(kv)/2)
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		name, _ := kv[i].(string)
		if kv[i+1] == nil {
			delete(out, name)
			continue
		}
		out[name] = kv[i+1]
	}
	return out
}
