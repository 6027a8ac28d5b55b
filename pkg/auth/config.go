package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// CheckConfig reports what is wrong with a service's auth settings: a
// secret or a JWKS is required outside dev mode, the secret must be long
// enough, and a JWKS needs an issuer and an audience, because a provider's
// keys sign tokens for all its applications (and, for Entra's common keys,
// every tenant).
func CheckConfig(c config.Auth) error {
	var errs []error
	if c.JWTSecret == "" && c.JWKSURL == "" && !c.DevMode {
		errs = append(errs, errors.New("AUTH_JWT_SECRET or AUTH_JWKS_URL is required (or AUTH_DEV_MODE=true for local use)"))
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < MinSecretBytes {
		errs = append(errs, fmt.Errorf("AUTH_JWT_SECRET must be at least %d bytes", MinSecretBytes))
	}
	if c.JWKSURL != "" {
		if err := checkJWKSURL(c.JWKSURL); err != nil {
			errs = append(errs, fmt.Errorf("AUTH_JWKS_URL: %w", err))
		}
		if strings.TrimSpace(c.Issuer) == "" || strings.TrimSpace(strings.Join(c.Audience, "")) == "" {
			errs = append(errs, errors.New("AUTH_JWKS_URL needs AUTH_ISSUER and AUTH_AUDIENCE: the provider's keys sign tokens for other applications too"))
		}
		if c.JWKSRefresh <= 0 {
			errs = append(errs, errors.New("AUTH_JWKS_REFRESH must be positive"))
		}
	}
	if c.MaxTokenAge <= 0 {
		errs = append(errs, errors.New("AUTH_MAX_TOKEN_AGE must be positive"))
	}
	if c.CacheSize < 0 {
		errs = append(errs, errors.New("AUTH_CACHE_SIZE must be 0 (off) or positive"))
	}
	return errors.Join(errs...)
}

// FromConfig returns the Verifier for a service's auth settings: the
// configured secret, else (dev mode) the public dev secret, and the JWKS
// when one is set, whose background fetches end with ctx. log receives
// failed JWKS fetches.
func FromConfig(ctx context.Context, c config.Auth, log *slog.Logger) (*Verifier, error) {
	secret := c.JWTSecret
	if secret == "" && c.DevMode {
		secret = DevSecret
	}
	if secret == "" && c.JWKSURL == "" {
		return nil, errors.New("auth: no AUTH_JWT_SECRET, no AUTH_JWKS_URL and not in dev mode")
	}
	opts := []Option{WithCache(c.CacheSize), WithIssuer(c.Issuer), WithAudience(c.Audience...)}
	if c.MaxTokenAge != 0 {
		opts = append(opts, WithMaxTokenAge(c.MaxTokenAge))
	}
	if c.JWKSURL != "" {
		opts = append(opts, WithJWKS(ctx, JWKS{URL: c.JWKSURL, Refresh: c.JWKSRefresh, Log: log}))
	}
	return NewVerifier(secret, opts...)
}
