package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"

	"github.com/MicahParks/jwkset"
)

// minRSABits is the smallest RSA modulus accepted (RFC 7518 section 3.3).
const minRSABits = 2048

var (
	rsaAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	// jwksAlgs are the algorithms a JWKS key may be pinned to.
	jwksAlgs = append(slices.Clone(rsaAlgs), "ES256", "ES384", "ES512", "EdDSA")
)

// publicKey is a JWKS key and the one algorithm it verifies.
type publicKey struct {
	kid string
	alg string
	key crypto.PublicKey
}

// same reports whether o is the same key for the same algorithm.
func (k *publicKey) same(o *publicKey) bool {
	if k == nil || o == nil || k.kid != o.kid || k.alg != o.alg {
		return false
	}
	eq, ok := k.key.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(o.key)
}

// pin turns a JWK into a publicKey with exactly one algorithm: the JWK's
// alg, which must suit its key type, or without one (Entra's set has none)
// the type's own: RS256 for RSA, ES256 / ES384 / ES512 for P-256 / P-384 /
// P-521, EdDSA for Ed25519. A token whose header names another algorithm
// is refused, so an RSA key is never an HMAC secret or a PS384 key.
func pin(m jwkset.JWKMarshal) (*publicKey, error) {
	if m.KID == "" {
		return nil, errors.New("no kid: tokens name their key by kid")
	}
	if m.USE != "" && m.USE != jwkset.UseSig {
		return nil, fmt.Errorf("use %q is not sig", m.USE)
	}
	j, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if err != nil {
		return nil, err
	}
	var algs []string // the first one is the type's own
	switch k := j.Key().(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits, want at least %d", n, minRSABits)
		}
		algs = rsaAlgs
	case *ecdsa.PublicKey:
		switch k.Curve.Params().Name {
		case "P-256":
			algs = []string{"ES256"}
		case "P-384":
			algs = []string{"ES384"}
		case "P-521":
			algs = []string{"ES512"}
		default:
			return nil, fmt.Errorf("unsupported curve %s", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
		algs = []string{"EdDSA"}
	default:
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	alg := algs[0]
	if m.ALG != "" {
		if !slices.Contains(algs, string(m.ALG)) {
			return nil, fmt.Errorf("alg %s does not suit a %s key", m.ALG, m.KTY)
		}
		alg = string(m.ALG)
	}
	return &publicKey{kid: m.KID, alg: alg, key: j.Key()}, nil
}
