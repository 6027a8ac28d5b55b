package auth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// loadAuth is config.Auth as a service loads it from the environment.
func loadAuth(t *testing.T, env map[string]string) config.Auth {
	t.Helper()
	var c config.Auth
	if err := config.LoadFrom(&c, env); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheckConfig(t *testing.T) {
	key := strings.Repeat("k", 32)
	jwks := "https://idp.example.com/realms/shop/protocol/openid-connect/certs"
	tests := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"secret", map[string]string{"AUTH_JWT_SECRET": key}, true},
		{"dev mode", map[string]string{"AUTH_DEV_MODE": "true"}, true},
		{"neither", map[string]string{}, false},
		{"short secret", map[string]string{"AUTH_JWT_SECRET": "short", "AUTH_DEV_MODE": "true"}, false},
		{"jwks alone", map[string]string{"AUTH_JWKS_URL": jwks, "AUTH_ISSUER": "https://idp.example.com/realms/shop", "AUTH_AUDIENCE": "waitingroom"}, true},
		{"jwks and secret", map[string]string{"AUTH_JWKS_URL": jwks, "AUTH_JWT_SECRET": key, "AUTH_ISSUER": "i", "AUTH_AUDIENCE": "a,b"}, true},
		{"jwks without issuer", map[string]string{"AUTH_JWKS_URL": jwks, "AUTH_AUDIENCE": "waitingroom"}, false},
		{"jwks without audience", map[string]string{"AUTH_JWKS_URL": jwks, "AUTH_ISSUER": "i", "AUTH_AUDIENCE": " , "}, false},
		{"jwks not a URL", map[string]string{"AUTH_JWKS_URL": "idp/certs", "AUTH_ISSUER": "i", "AUTH_AUDIENCE": "a"}, false},
		{"jwks ftp", map[string]string{"AUTH_JWKS_URL": "ftp://idp/certs", "AUTH_ISSUER": "i", "AUTH_AUDIENCE": "a"}, false},
		{"jwks refresh 0", map[string]string{"AUTH_JWKS_URL": jwks, "AUTH_ISSUER": "i", "AUTH_AUDIENCE": "a", "AUTH_JWKS_REFRESH": "0s"}, false},
		{"max age 0", map[string]string{"AUTH_JWT_SECRET": key, "AUTH_MAX_TOKEN_AGE": "0s"}, false},
		{"max age 1h", map[string]string{"AUTH_JWT_SECRET": key, "AUTH_MAX_TOKEN_AGE": "1h"}, true},
	}
	for _, tt := range tests {
		if err := CheckConfig(loadAuth(t, tt.env)); (err == nil) != tt.ok {
			t.Errorf("%s: CheckConfig = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
	c := loadAuth(t, map[string]string{"AUTH_JWT_SECRET": key})
	if c.MaxTokenAge != 24*time.Hour || c.JWKSRefresh != 15*time.Minute {
		t.Fatalf("defaults: AUTH_MAX_TOKEN_AGE %s, AUTH_JWKS_REFRESH %s; want 24h, 15m", c.MaxTokenAge, c.JWKSRefresh)
	}
	if c := loadAuth(t, map[string]string{"AUTH_AUDIENCE": "a,b"}); len(c.Audience) != 2 {
		t.Fatalf("AUTH_AUDIENCE=a,b gave %q, want 2 audiences", c.Audience)
	}
}

func TestFromConfigUsesTheDevSecretOnlyInDevMode(t *testing.T) {
	v, err := FromConfig(context.Background(), config.Auth{DevMode: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := NewVerifier(DevSecret)
	tok, _ := dev.Mint("u1", "", 60e9)
	if p, err := v.Verify(tok); err != nil || p.UserID != "u1" {
		t.Fatalf("dev verifier refused a dev token: %v", err)
	}
	if _, err := FromConfig(context.Background(), config.Auth{}, nil); err == nil {
		t.Fatal("FromConfig without a secret outside dev mode succeeded")
	}
	prod, _ := FromConfig(context.Background(), config.Auth{JWTSecret: strings.Repeat("p", 40), DevMode: true}, nil)
	if _, err := prod.Verify(tok); err == nil {
		t.Fatal("a configured secret must win over dev mode: the dev token was accepted")
	}
}
