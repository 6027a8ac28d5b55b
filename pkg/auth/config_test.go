package auth

import (
	"strings"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/config"
)

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name string
		c    config.Auth
		ok   bool
	}{
		{"secret", config.Auth{JWTSecret: strings.Repeat("k", 32)}, true},
		{"dev mode", config.Auth{DevMode: true}, true},
		{"neither", config.Auth{}, false},
		{"short secret", config.Auth{JWTSecret: "short", DevMode: true}, false},
	}
	for _, tt := range tests {
		if err := CheckConfig(tt.c); (err == nil) != tt.ok {
			t.Errorf("%s: CheckConfig = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestFromConfigUsesTheDevSecretOnlyInDevMode(t *testing.T) {
	v, err := FromConfig(config.Auth{DevMode: true})
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := NewVerifier(DevSecret)
	tok, _ := dev.Mint("u1", "", 60e9)
	if p, err := v.Verify(tok); err != nil || p.UserID != "u1" {
		t.Fatalf("dev verifier refused a dev token: %v", err)
	}
	if _, err := FromConfig(config.Auth{}); err == nil {
		t.Fatal("FromConfig without a secret outside dev mode succeeded")
	}
	prod, _ := FromConfig(config.Auth{JWTSecret: strings.Repeat("p", 40), DevMode: true})
	if _, err := prod.Verify(tok); err == nil {
		t.Fatal("a configured secret must win over dev mode: the dev token was accepted")
	}
}

func TestCheckProxies(t *testing.T) {
	if err := CheckProxies([]string{"10.0.0.0/8", "192.168.1.1", "::1"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckProxies([]string{"10.0.0.0/8", "nope", "300.1.1.1"}); err == nil || strings.Count(err.Error(), "TRUSTED_PROXIES") != 2 {
		t.Fatalf("CheckProxies = %v, want two complaints", err)
	}
}
