// Package auth verifies the HS256 JWTs users and operators present.
//
// A token's sub claim is the user id; `role: admin` grants the admin API. The
// signing method is pinned to HS256 and exp is required, so `alg: none`,
// RS/HS confusion and never-expiring tokens are all refused.
package auth

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/golang-jwt/jwt/v5"
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
}

// NewVerifier returns a Verifier for the HS256 secret. A secret shorter than
// MinSecretBytes is refused: HS256 with a short key is guessable offline.
func NewVerifier(secret string) (*Verifier, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("auth: secret must be at least %d bytes, got %d", MinSecretBytes, len(secret))
	}
	return &Verifier{
		secret: []byte(secret),
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(5*time.Second),
		),
	}, nil
}

// Verify parses and checks a raw token and returns its principal.
func (v *Verifier) Verify(raw string) (Principal, error) {
	if raw == "" {
		return Principal{}, ErrMissingToken
	}
	var claims Claims
	_, err := v.parser.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return v.secret, nil })
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if !ValidUserID(claims.Subject) {
		return Principal{}, fmt.Errorf("%w: sub is not a valid user id", ErrInvalidToken)
	}
	return Principal{UserID: claims.Subject, Role: claims.Role}, nil
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
