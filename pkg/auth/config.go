package auth

import (
	"errors"
	"fmt"
	"net"

	"github.com/waitingroom/waitingroom/pkg/config"
)

// CheckConfig reports what is wrong with a service's auth settings: a secret
// is required outside dev mode, and must be long enough.
func CheckConfig(c config.Auth) error {
	if c.JWTSecret == "" && !c.DevMode {
		return errors.New("AUTH_JWT_SECRET is required (or AUTH_DEV_MODE=true for local use)")
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < MinSecretBytes {
		return fmt.Errorf("AUTH_JWT_SECRET must be at least %d bytes", MinSecretBytes)
	}
	if c.CacheSize < 0 {
		return errors.New("AUTH_CACHE_SIZE must be 0 (off) or positive")
	}
	return nil
}

// FromConfig returns the Verifier for a service's auth settings: the
// configured secret, else (dev mode) the public dev secret.
func FromConfig(c config.Auth) (*Verifier, error) {
	if c.JWTSecret != "" {
		return NewVerifier(c.JWTSecret, WithCache(c.CacheSize))
	}
	if !c.DevMode {
		return nil, errors.New("auth: no AUTH_JWT_SECRET and not in dev mode")
	}
	return NewVerifier(DevSecret, WithCache(c.CacheSize))
}

// CheckProxies reports TRUSTED_PROXIES entries that are neither a CIDR nor an IP.
func CheckProxies(proxies []string) error {
	var errs []error
	for _, p := range proxies {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %q is neither a CIDR nor an IP", p))
		}
	}
	return errors.Join(errs...)
}
