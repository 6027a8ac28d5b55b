// Package challenge issues and checks the proof-of-work challenges a queue
// may ask for at enter.
//
// A challenge is stateless until it is used: the gateway signs what it
// needs to check it later (difficulty, expiry, a random id) with an HMAC
// bound to the queue and the user, so any gateway replica can check a
// solution and no replica stores unsolved challenges. A solution is a nonce
// such that SHA-256("<challenge>:<nonce>") starts with at least the
// challenge's difficulty in zero bits: about 2^bits hashes to find, one to
// check. Single use is the enter script's part: it marks the id used, in
// the queue's slot, in the same step that gives the place.
//
// Wire forms:
//
//	challenge  base64url(payload) "." base64url(mac)        (no ':')
//	payload    version(1) bits(1) expiresAtMs(8, big endian) id(16)
//	mac        HMAC-SHA256(key, "wr-pow-v1\x00" queue "\x00" user "\x00" payload)[:16]
//	solution   challenge ":" nonce                          (X-Enter-Challenge)
//	nonce      1 to 20 decimal digits
package challenge

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Algorithm names the hash in the challenge document the page receives.
const Algorithm = "SHA-256"

// Bounds of a difficulty, in leading zero bits.
const (
	MinBits = 1
	MaxBits = 32
)

// MinKeyBytes is the shortest accepted signing key.
const MinKeyBytes = 32

const (
	version     = 1
	payloadLen  = 1 + 1 + 8 + 16
	macLen      = 16
	maxNonceLen = 20
	domain      = "wr-pow-v1"
)

// enc is strict: a challenge has one spelling (lenient decoding would let
// the last character of each part vary in its unused bits).
var enc = base64.RawURLEncoding.Strict()

// encodedLen is the length of a challenge string.
var encodedLen = enc.EncodedLen(payloadLen) + 1 + enc.EncodedLen(macLen)

// Errors a solution is refused with. All of them are the client's: a 403.
var (
	ErrMalformed = errors.New("challenge: malformed solution")
	ErrForged    = errors.New("challenge: not issued for this queue and user")
	ErrExpired   = errors.New("challenge: expired")
	ErrWork      = errors.New("challenge: the nonce does not solve the challenge")
)

// Challenge is one issued challenge.
type Challenge struct {
	// Value is what the client hashes with its nonce.
	Value string
	// Bits is the difficulty: leading zero bits of the hash.
	Bits int
	// ExpiresAt is when a solution stops being accepted.
	ExpiresAt time.Time
}

// Proof is a checked solution: what the enter script needs to accept it
// once.
type Proof struct {
	// ID is the challenge's random id (32 hex characters).
	ID string
	// Bits is the difficulty the challenge was issued at.
	Bits int
	// ExpiresAt is the challenge's expiry.
	ExpiresAt time.Time
}

// Signer issues and checks challenges with one key. Every gateway replica
// must have the same key.
type Signer struct {
	key  []byte
	ttl  time.Duration
	now  func() time.Time
	read func([]byte) (int, error) // the ids' randomness
}

// NewSigner returns a Signer whose challenges live for ttl.
func NewSigner(key []byte, ttl time.Duration) (*Signer, error) {
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("challenge: key must be at least %d bytes, got %d", MinKeyBytes, len(key))
	}
	if ttl < time.Second || ttl > time.Hour {
		return nil, fmt.Errorf("challenge: lifetime must be between 1s and 1h, got %s", ttl)
	}
	return &Signer{key: append([]byte(nil), key...), ttl: ttl, now: time.Now, read: rand.Read}, nil
}

// Issue returns a fresh challenge of difficulty bits for user in queue q.
func (s *Signer) Issue(q, user string, difficulty int) (Challenge, error) {
	if difficulty < MinBits || difficulty > MaxBits {
		return Challenge{}, fmt.Errorf("challenge: difficulty must be %d..%d bits, got %d", MinBits, MaxBits, difficulty)
	}
	exp := s.now().Add(s.ttl).Truncate(time.Millisecond)
	p := make([]byte, payloadLen)
	p[0], p[1] = version, byte(difficulty)
	binary.BigEndian.PutUint64(p[2:10], uint64(exp.UnixMilli()))
	if _, err := s.read(p[10:]); err != nil {
		return Challenge{}, fmt.Errorf("challenge: %w", err)
	}
	v := enc.EncodeToString(p) + "." + enc.EncodeToString(s.mac(q, user, p))
	return Challenge{Value: v, Bits: difficulty, ExpiresAt: exp}, nil
}

// Check verifies a solution (the X-Enter-Challenge header) for user in
// queue q: well formed, signed for this queue and user, unexpired by this
// gateway's clock, and the nonce does the work. Whether the difficulty is
// still enough and whether the challenge was used before is the enter
// script's to decide.
func (s *Signer) Check(q, user, solution string) (Proof, error) {
	value, nonce, ok := strings.Cut(solution, ":")
	if !ok || len(value) != encodedLen || !validNonce(nonce) {
		return Proof{}, ErrMalformed
	}
	rawP, rawM, ok := strings.Cut(value, ".")
	if !ok {
		return Proof{}, ErrMalformed
	}
	p, err := enc.DecodeString(rawP)
	if err != nil || len(p) != payloadLen || p[0] != version {
		return Proof{}, ErrMalformed
	}
	m, err := enc.DecodeString(rawM)
	if err != nil || len(m) != macLen {
		return Proof{}, ErrMalformed
	}
	if !hmac.Equal(m, s.mac(q, user, p)) {
		return Proof{}, ErrForged
	}
	difficulty := int(p[1])
	if difficulty < MinBits || difficulty > MaxBits {
		return Proof{}, ErrMalformed // signed by us, so never: a key mix-up
	}
	exp := time.UnixMilli(int64(binary.BigEndian.Uint64(p[2:10])))
	if !s.now().Before(exp) {
		return Proof{}, ErrExpired
	}
	if LeadingZeroBits(value, nonce) < difficulty {
		return Proof{}, ErrWork
	}
	return Proof{ID: hex.EncodeToString(p[10:]), Bits: difficulty, ExpiresAt: exp}, nil
}

// LeadingZeroBits is the number of leading zero bits of
// SHA-256(value ":" nonce): the work a nonce does for a challenge.
func LeadingZeroBits(value, nonce string) int {
	sum := sha256.Sum256([]byte(value + ":" + nonce))
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Solve finds the smallest nonce for a challenge value of difficulty bits
// (tests and load generators; the page solves in a Web Worker).
func Solve(value string, difficulty int) string {
	for i := uint64(0); ; i++ {
		n := strconv.FormatUint(i, 10)
		if LeadingZeroBits(value, n) >= difficulty {
			return n
		}
	}
}

// DeriveKey turns another secret (the HS256 JWT key every replica already
// shares) into a challenge key of its own, so one key is never used for two
// purposes.
func DeriveKey(secret string) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte("waitingroom enter-challenge key v1"))
	return h.Sum(nil)
}

func (s *Signer) mac(q, user string, payload []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(domain + "\x00" + q + "\x00" + user + "\x00"))
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

func validNonce(n string) bool {
	if len(n) == 0 || len(n) > maxNonceLen {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}
