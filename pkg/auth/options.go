package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Option configures a Verifier.
type Option func(*Verifier) error

// WithCache remembers up to size verified tokens (the oldest added go
// first), so a token seen again skips the signature and the claims parsing
// until it expires. A hit does not make an entry younger: polls read the
// cache under a shared lock, and for polling there is nothing to gain from
// recency (while the polling users fit, nothing is evicted; when more poll
// round-robin than fit, least-recently-used misses every time too). 0 turns the cache off. Only tokens that passed every
// check are cached, keyed by the SHA-256 of the whole token, so a forged or
// altered token can never hit; a JWKS token's entry also ends when its key
// leaves the set. An entry takes about 225 bytes of heap.
func WithCache(size int) Option {
	return func(v *Verifier) error {
		if size < 0 {
			return fmt.Errorf("auth: cache size must not be negative, got %d", size)
		}
		if size == 0 {
			v.cache = nil
			return nil
		}
		c, err := lru.New[[sha256.Size]byte, verified](size)
		if err != nil {
			return fmt.Errorf("auth: cache: %w", err)
		}
		v.cache = c
		return nil
	}
}

// WithIssuer requires the iss claim to be iss; "" checks nothing.
func WithIssuer(iss string) Option {
	return func(v *Verifier) error { v.issuer = strings.TrimSpace(iss); return nil }
}

// WithAudience requires the aud claim to name at least one of aud; none
// (or only blanks) checks nothing.
func WithAudience(aud ...string) Option {
	return func(v *Verifier) error {
		v.audience = nil
		for _, a := range aud {
			if a = strings.TrimSpace(a); a != "" {
				v.audience = append(v.audience, a)
			}
		}
		return nil
	}
}

// WithMaxTokenAge refuses tokens whose lifetime (exp minus iat, or exp
// minus now without iat) is longer than d; the default is
// DefaultMaxTokenAge.
func WithMaxTokenAge(d time.Duration) Option {
	return func(v *Verifier) error {
		if d <= 0 {
			return fmt.Errorf("auth: the maximum token age must be positive, got %s", d)
		}
		v.maxAge = d
		return nil
	}
}

// WithJWKS verifies tokens against the key set at j.URL too. The set is
// fetched in the background from NewVerifier on, until ctx ends or Close
// is called; NewVerifier does not wait for it (see Ready).
func WithJWKS(ctx context.Context, j JWKS) Option {
	return func(v *Verifier) error {
		if err := checkJWKSURL(j.URL); err != nil {
			return err
		}
		if j.Refresh < 0 {
			return fmt.Errorf("auth: the JWKS refresh interval must not be negative, got %s", j.Refresh)
		}
		v.jwks, v.jwksCtx = &j, ctx
		return nil
	}
}

func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("auth: JWKS URL: %w", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("auth: the JWKS URL must be an absolute http(s) URL")
	}
	return nil
}

// withClock replaces the clock used for expiries, lifetimes and the
// unknown-kid fetch limit (tests).
func withClock(now func() time.Time) Option {
	return func(v *Verifier) error { v.now = now; return nil }
}
