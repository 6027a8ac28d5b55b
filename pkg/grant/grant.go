// Package grant makes the entry tokens a leader's tick hands out, signed,
// so that the order-service can tell a token the waiting room issued from
// junk without asking Redis: what lets a queue that fails OPEN keep
// selling to the people it admitted, and to nobody else, while Redis is
// down.
//
// A signed token binds the queue, the line that issued it, its public id
// and when it was made (the issuer's clock). It does not bind the user:
// the user is chosen by the issue script, after the token was made. Redis
// binds token and user while it is up; while it is down, an order with a
// signed token is still one order per token (the orders table holds one
// order per token id) and counts against its user's maxOrdersPerUser.
//
// Keys rotate without downtime as queue tickets' do: the first key signs,
// every key verifies.
//
// Wire form of a signed secret (the token id is hex(id), as unsigned
// tokens' are; a line's tokens carry "<i>." before both, queue.LineToken):
//
//	secret   base64url(payload mac)
//	payload  version(1) id(16) issuedAt(8, big endian Unix ms)
//	mac      HMAC-SHA256(key, "wr-entry-token-v1\x00" queue "\x00" line "\x00" payload)[:16]
package grant

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// MinKeyBytes is the shortest accepted key.
const MinKeyBytes = 32

const (
	version    = 1
	idLen      = 16
	payloadLen = 1 + idLen + 8
	macLen     = 16
	domain     = "wr-entry-token-v1"
)

var enc = base64.RawURLEncoding.Strict()

// secretLen is the length of every signed secret (before a line prefix).
var secretLen = enc.EncodedLen(payloadLen + macLen)

// Errors a presented token is refused with.
var (
	// ErrUnsigned: not a signed token's form (an unsigned token, or junk).
	ErrUnsigned = errors.New("grant: not a signed entry token")
	// ErrForged: a signed token's form, not signed by any key for this
	// queue and line.
	ErrForged = errors.New("grant: entry token not issued for this queue")
)

// Signer signs with its first key and verifies with any.
type Signer struct {
	keys [][]byte
}

// NewSigner returns a Signer over keys, the first of which signs.
func NewSigner(keys ...[]byte) (*Signer, error) {
	if len(keys) == 0 {
		return nil, errors.New("grant: at least one key is required")
	}
	s := &Signer{}
	for i, k := range keys {
		if len(k) < MinKeyBytes {
			return nil, fmt.Errorf("grant: key %d must be at least %d bytes, got %d", i+1, MinKeyBytes, len(k))
		}
		s.keys = append(s.keys, append([]byte(nil), k...))
	}
	return s, nil
}

// FromSettings is the Signer of ENTRY_TOKEN_KEYS (a comma list already
// split), or nil when the list is empty: tokens are then unsigned, and a
// queue that fails OPEN lets nobody order while Redis is down.
func FromSettings(keys []string) (*Signer, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		raw[i] = []byte(strings.TrimSpace(k))
	}
	s, err := NewSigner(raw...)
	if err != nil {
		return nil, fmt.Errorf("ENTRY_TOKEN_KEYS: %w", err)
	}
	return s, nil
}

func mac(key []byte, q string, line int, payload []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(domain))
	h.Write([]byte{0})
	h.Write([]byte(q))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(line)))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

// Grants makes n signed grants for line of queue q, made at at. Their
// secrets and ids are without the line's prefix, which the store adds
// (queue.LineToken) as for unsigned grants. A nil Signer makes unsigned
// ones (queue.Grants).
func (s *Signer) Grants(q string, line, n int, at time.Time) ([]queue.Grant, error) {
	if s == nil {
		return queue.Grants(n)
	}
	ids := make([]byte, idLen*n)
	if _, err := rand.Read(ids); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	out := make([]queue.Grant, n)
	buf := make([]byte, payloadLen, payloadLen+macLen)
	buf[0] = version
	binary.BigEndian.PutUint64(buf[1+idLen:], uint64(at.UnixMilli()))
	for i := range out {
		id := ids[idLen*i : idLen*(i+1)]
		copy(buf[1:1+idLen], id)
		signed := append(buf[:payloadLen], mac(s.keys[0], q, line, buf[:payloadLen])...)
		out[i] = queue.Grant{Secret: enc.EncodeToString(signed), TokenID: hex.EncodeToString(id)}
	}
	return out, nil
}

// Verified is what a signed token tells without Redis.
type Verified struct {
	// TokenID is the token's id as the orders table and events know it
	// (with its line's prefix).
	TokenID string
	// IssuedAt is when the issuer made it, by the issuer's clock.
	IssuedAt time.Time
}

// Check tells whether secret, presented for an order in queue q, is a
// token signed by any of the keys for q and the line it names.
func (s *Signer) Check(q, secret string) (Verified, error) {
	if s == nil {
		return Verified{}, ErrUnsigned
	}
	line := queue.TokenLine(secret)
	raw := secret
	if line > 0 {
		raw = secret[len(strconv.Itoa(line))+1:]
	}
	if len(raw) != secretLen {
		return Verified{}, ErrUnsigned
	}
	var b [payloadLen + macLen]byte
	if n, err := enc.Decode(b[:], []byte(raw)); err != nil || n != len(b) || b[0] != version {
		return Verified{}, ErrUnsigned
	}
	for _, k := range s.keys {
		if hmac.Equal(b[payloadLen:], mac(k, q, line, b[:payloadLen])) {
			at := int64(binary.BigEndian.Uint64(b[1+idLen : payloadLen]))
			return Verified{
				TokenID:  queue.LineToken(line, hex.EncodeToString(b[1:1+idLen])),
				IssuedAt: time.UnixMilli(at).UTC(),
			}, nil
		}
	}
	return Verified{}, ErrForged
}
