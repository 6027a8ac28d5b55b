package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/waitingroom/waitingroom/pkg/auth/authtest"
	"github.com/waitingroom/waitingroom/pkg/config"
)

// TestTokenFromAnywhereIsRefused is issue 11 item 5 as it was found: a
// token signed with the right key but living until 2100, from another
// issuer, for another application, was accepted. Before the fix this
// failed with "Verify(...) = {UserID:alice Role:}, <nil>".
func TestTokenFromAnywhereIsRefused(t *testing.T) {
	now := time.Now()
	claims := func(kv ...any) jwt.MapClaims {
		return authtest.With(jwt.MapClaims{"sub": "alice", "iss": "https://shop.example/auth", "aud": "waitingroom",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, kv...)
	}
	sign := func(c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain, err := NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := FromConfig(context.Background(), config.Auth{JWTSecret: secret, Issuer: "https://shop.example/auth", Audience: []string{"waitingroom"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	y2100 := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	tests := []struct {
		name string
		v    *Verifier
		tok  string
	}{
		{"exp 2100, iss evil, aud other-app; nothing configured", plain, sign(claims("iss", "evil", "aud", "other-app", "exp", y2100))},
		{"exp 2100, no iat; nothing configured", plain, sign(claims("iat", nil, "exp", y2100))},
		{"exp 2100, iss evil, aud other-app", strict, sign(claims("iss", "evil", "aud", "other-app", "exp", y2100))},
		{"iss evil", strict, sign(claims("iss", "evil"))},
		{"aud other-app", strict, sign(claims("aud", "other-app"))},
		{"aud [other-app, another]", strict, sign(claims("aud", []string{"other-app", "another"}))},
		{"no iss", strict, sign(claims("iss", nil))},
		{"no aud", strict, sign(claims("aud", nil))},
		{"exp 2100", strict, sign(claims("exp", y2100))},
	}
	for _, tt := range tests {
		if p, err := tt.v.Verify(tt.tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: Verify = %+v, %v; want ErrInvalidToken", tt.name, p, err)
		}
	}
	for _, c := range []jwt.MapClaims{claims(), claims("aud", []string{"other-app", "waitingroom"})} {
		if p, err := strict.Verify(sign(c)); err != nil || p.UserID != "alice" {
			t.Errorf("good token %v: %+v, %v", c, p, err)
		}
	}
}
