// Package auth verifies the HS256 JWTs users and operators present.
//
// A token's sub claim is the user id; `role: admin` grants the admin API. The
// signing method is pinned to HS256 and exp is required, so `alg: none`,
// RS/HS confusion and never-expiring tokens are all refused.
package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"
)

// DevSecret is the fixed, public key used when AUTH_DEV_MODE is on and no
// AUTH_JWT_SECRET is given. Anybody can mint tokens with it: local use only.
const DevSecret = "waitingroom-dev-secret-not-for-production"

// RoleAdmin is the role claim that grants the admin API.
const RoleAdmin = "admin"

// MinSecretBytes is the shortest accepted HS256 key (RFC 7518 section 3.2).
const MinSecretBytes = 32

var userIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,128}$`)

// Errors returned by Verify.
var (
	ErrMissingToken = errors.New("auth: missing bearer token")
	ErrInvalidToken = errors.New("auth: invalid token")
)

// Claims are the claims we read from a token.
type Claims struct {
	Role string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

// Principal is the authenticated caller.
type Principal struct {
	UserID string
	Role   string
}

// IsAdmin reports whether the caller may use the admin API.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// ValidUserID reports whether id is an acceptable user id (JWT sub).
func ValidUserID(id string) bool { return userIDPattern.MatchString(id) }

// Verifier checks tokens and mints them in dev mode.
type Verifier struct {
	secret []byte
	parser *jwt.Parser
	// cache holds tokens that verified, until they expire: a waiting user
	// polls with the same token every few seconds, and the signature and
	// claims check is a sixth of the gateway's CPU on the position path.
	cache *lru.Cache[[sha256.Size]byte, verified]
	now   func() time.Time
}

// verified is a cached verification: the principal and the instant
// (expiry plus leeway) after which the token is refused again.
type verified struct {
	p     Principal
	until time.Time
}

// leeway is the clock skew allowed on exp, iat and nbf.
const leeway = 5 * time.Second

// Option configures a Verifier.
type Option func(*Verifier) error

// WithCache remembers up to size verified tokens (least recently used go
// first), so a token seen again skips the HMAC and the claims parsing until
// it expires. 0 turns the cache off. Only tokens that passed every check
// are cached, keyed by the SHA-256 of the whole token, so a forged or
// altered token can never hit. An entry takes about 225 bytes of heap.
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

// withClock replaces the clock the cache compares expiries with (tests).
func withClock(now func() time.Time) Option {
	return func(v *Verifier) error { v.now = now; return nil }
}

// NewVerifier returns a Verifier for the HS256 secret. A secret shorter than
// MinSecretBytes is refused: HS256 with a short key is guessable offline.
func NewVerifier(secret string, opts ...Option) (*Verifier, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("auth: secret must be at least %d bytes, got %d", MinSecretBytes, len(secret))
	}
	v := &Verifier{secret: []byte(secret), now: time.Now}
	for _, o := range opts {
		if err := o(v); err != nil {
			return nil, err
		}
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(v.now),
	)
	return v, nil
}

// Verify parses and checks a raw token and returns its principal.
func (v *Verifier) Verify(raw string) (Principal, error) {
	if raw == "" {
		return Principal{}, ErrMissingToken
	}
	var key [sha256.Size]byte
	if v.cache != nil {
		key = sha256.Sum256([]byte(raw))
		if hit, ok := v.cache.Get(key); ok {
			if v.now().Before(hit.until) {
				return hit.p, nil
			}
			v.cache.Remove(key) // expired: the full check below refuses it
		}
	}
	var claims Claims
	_, err := v.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if !ValidUserID(claims.Subject) {
		return Principal{}, fmt.Errorf("%w: sub is not a valid user id", ErrInvalidToken)
	}
	p := Principal{UserID: claims.Subject, Role: claims.Role}
	if v.cache != nil {
		// exp is required, so ExpiresAt is set once the parser accepted it.
		v.cache.Add(key, verified{p: p, until: claims.ExpiresAt.Add(leeway)})
	}
	return p, nil
}

// Mint signs a token for userID with the given role and lifetime.
func (v *Verifier) Mint(userID, role string, ttl time.Duration) (string, error) {
	if !ValidUserID(userID) {
		return "", fmt.Errorf("auth: %q is not a valid user id", userID)
	}
	now := time.Now()
	claims := Claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(v.secret)
}
