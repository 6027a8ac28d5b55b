// Package auth verifies the JWTs users and operators present.
//
// A token's sub claim is the user id; `role: admin` grants the admin API.
// Tokens come from a shared HS256 secret (AUTH_JWT_SECRET, and what Mint
// signs in dev mode), from an identity provider's JSON Web Key Set
// (AUTH_JWKS_URL), or both. The algorithm is pinned: HS256 only with the
// secret, and a JWKS key verifies only the one algorithm its alg or type
// names, so `alg: none`, RS/HS confusion and a key used for another
// algorithm are all refused. exp is required; iss and aud are enforced when
// configured, and a token whose lifetime exceeds the maximum is refused.
package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// DevSecret is the fixed, public key used when AUTH_DEV_MODE is on and no
// AUTH_JWT_SECRET is given. Anybody can mint tokens with it: local use only.
const DevSecret = "waitingroom-dev-secret-not-for-production"

// RoleAdmin is the role claim that grants the admin API.
const RoleAdmin = "admin"

// MinSecretBytes is the shortest accepted HS256 key (RFC 7518 section 3.2).
const MinSecretBytes = 32

// DefaultMaxTokenAge is the longest token lifetime accepted unless
// WithMaxTokenAge says otherwise.
const DefaultMaxTokenAge = 24 * time.Hour

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

// ValidUserID reports whether id is an acceptable user id (JWT sub). The
// rule is queue.ValidUserID, the one the domain checks too; a token whose
// sub breaks it is refused.
func ValidUserID(id string) bool { return queue.ValidUserID(id) }

// Verifier checks tokens and mints them in dev mode.
type Verifier struct {
	secret   []byte  // the HS256 key; nil when tokens come only from a JWKS
	keys     *keySet // nil without a JWKS
	issuer   string
	audience []string
	maxAge   time.Duration
	parser   *jwt.Parser
	// cache holds tokens that verified, until they expire: a waiting user
	// polls with the same token every few seconds, and the signature and
	// claims check is a sixth of the gateway's CPU on the position path.
	cache *lru.Cache[[sha256.Size]byte, verified]
	now   func() time.Time

	jwks    *JWKS // from WithJWKS, started last in NewVerifier
	jwksCtx context.Context
}

// verified is a cached verification: the principal, the instant (expiry
// plus leeway) after which the token is refused again, and the JWKS key
// that signed it (nil for HS256), which must still be in the set.
type verified struct {
	p     Principal
	until time.Time
	key   *publicKey
}

// leeway is the clock skew allowed on exp, iat, nbf and the lifetime.
const leeway = 5 * time.Second

// NewVerifier returns a Verifier for the HS256 secret and the options. The
// secret may be empty when WithJWKS is given; else one shorter than
// MinSecretBytes is refused: HS256 with a short key is guessable offline.
// With a JWKS, Close stops its background fetches.
func NewVerifier(secret string, opts ...Option) (*Verifier, error) {
	v := &Verifier{now: time.Now, maxAge: DefaultMaxTokenAge}
	for _, o := range opts {
		if err := o(v); err != nil {
			return nil, err
		}
	}
	var methods []string
	if secret != "" || v.jwks == nil {
		if len(secret) < MinSecretBytes {
			return nil, fmt.Errorf("auth: secret must be at least %d bytes, got %d", MinSecretBytes, len(secret))
		}
		v.secret = []byte(secret)
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if v.jwks != nil {
		methods = append(methods, jwksAlgs...)
	}
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		// One spelling per token: lenient base64url would accept the last
		// character of each part with other unused bits, so one token
		// would fill several cache entries and dodge a block by its text.
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(v.now),
	}
	if v.issuer != "" {
		popts = append(popts, jwt.WithIssuer(v.issuer))
	}
	if len(v.audience) > 0 {
		popts = append(popts, jwt.WithAudience(v.audience...))
	}
	v.parser = jwt.NewParser(popts...)
	if v.jwks != nil { // last: nothing can fail once its goroutine runs
		v.keys = newKeySet(v.jwksCtx, *v.jwks, v.now)
	}
	return v, nil
}

// Close stops the JWKS background fetches and waits for them to end.
func (v *Verifier) Close() {
	if v.keys != nil {
		v.keys.close()
	}
}

// Ready reports whether tokens can be verified: always without a JWKS,
// and once its keys were fetched with one. Until then JWKS tokens get
// ErrInvalidToken. It fits httpserver.Check, for /readyz.
func (v *Verifier) Ready(context.Context) error {
	if v.keys == nil {
		return nil
	}
	return v.keys.ready()
}

// Verify parses and checks a raw token and returns its principal.
func (v *Verifier) Verify(raw string) (Principal, error) {
	if raw == "" {
		return Principal{}, ErrMissingToken
	}
	var hash [sha256.Size]byte
	if v.cache != nil {
		hash = sha256.Sum256([]byte(raw))
		// Peek, not Get: a hit reads under the shared lock and does not
		// reorder the list (see WithCache).
		if hit, ok := v.cache.Peek(hash); ok {
			if v.now().Before(hit.until) && (hit.key == nil || v.keys.current(hit.key.kid) == hit.key) {
				return hit.p, nil
			}
			v.cache.Remove(hash) // expired or its key left the set: the full check below decides
		}
	}
	var claims Claims
	var signer *publicKey
	_, err := v.parser.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		key, k, err := v.key(t)
		signer = k
		return key, err
	})
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if !ValidUserID(claims.Subject) {
		return Principal{}, fmt.Errorf("%w: sub is not a valid user id", ErrInvalidToken)
	}
	// exp is required, so ExpiresAt is set once the parser accepted it.
	start := v.now()
	if claims.IssuedAt != nil {
		start = claims.IssuedAt.Time
	}
	if life := claims.ExpiresAt.Sub(start); life > v.maxAge+leeway {
		return Principal{}, fmt.Errorf("%w: a lifetime of %s is longer than %s", ErrInvalidToken, life, v.maxAge)
	}
	p := Principal{UserID: claims.Subject, Role: claims.Role}
	if v.cache != nil {
		v.cache.Add(hash, verified{p: p, until: claims.ExpiresAt.Add(leeway), key: signer})
	}
	return p, nil
}

// key returns what verifies t: the HS256 secret, or the JWKS key its kid
// names, which must be pinned to t's algorithm. The parser lets HS256
// through only with a secret and the JWKS algorithms only with a set.
func (v *Verifier) key(t *jwt.Token) (any, *publicKey, error) {
	alg := t.Method.Alg()
	if alg == jwt.SigningMethodHS256.Alg() && v.secret != nil {
		return v.secret, nil, nil
	}
	if v.keys == nil {
		return nil, nil, fmt.Errorf("unexpected algorithm %s", alg)
	}
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, nil, errors.New("a JWKS token must name its key (kid)")
	}
	k, err := v.keys.key(kid)
	if err != nil {
		return nil, nil, err
	}
	if k.alg != alg {
		return nil, nil, fmt.Errorf("key %q verifies %s, not %s", kid, k.alg, alg)
	}
	return k.key, k, nil
}

// Mint signs an HS256 token for userID with the given role and lifetime,
// naming the configured issuer and audience so the Verifier accepts it.
func (v *Verifier) Mint(userID, role string, ttl time.Duration) (string, error) {
	if v.secret == nil {
		return "", errors.New("auth: no HS256 secret to mint with")
	}
	if !ValidUserID(userID) {
		return "", fmt.Errorf("auth: %q is not a valid user id", userID)
	}
	if ttl > v.maxAge {
		return "", fmt.Errorf("auth: a token for %s outlives the maximum token age %s", ttl, v.maxAge)
	}
	now := time.Now()
	claims := Claims{
		Role: role,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    v.issuer,
			Subject:   userID,
			Audience:  v.audience,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(v.secret)
}
