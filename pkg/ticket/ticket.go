// Package ticket signs and checks queue tickets: what enter gives a person
// besides their place, so that later polls can be answered from the
// admission frontier every replica keeps in memory instead of from Redis.
//
// A ticket binds a queue, the queue's generation (when its configuration
// was created, so a ticket of a deleted queue never describes a place in the
// queue re-created under the same id), a user and the sequence number of
// the user's place. It is stateless: any gateway or notification-service
// replica with the key checks it with one HMAC. It says nothing the holder
// does not already know about their own place, and it is bound to them: a
// ticket shown by anyone else, or for another queue, is refused.
//
// Keys rotate without downtime: a Signer holds a list, signs with the first
// and accepts any. Deploy the new key second everywhere, then first, then
// drop the old one once the longest wait has passed. CheckCurrent re-signs
// a ticket of a later key with the first, so holders who poll move to the
// new key while the old one is still accepted.
//
// Wire form:
//
//	ticket   base64url(payload) "." base64url(mac)
//	payload  version(1) generation(8, big endian ms) seq(8, big endian)
//	mac      HMAC-SHA256(key, "wr-ticket-v1\x00" queue "\x00" user "\x00" payload)[:16]
package ticket

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// MinKeyBytes is the shortest accepted key.
const MinKeyBytes = 32

const (
	version    = 1
	payloadLen = 1 + 8 + 8
	macLen     = 16
	domain     = "wr-ticket-v1"
)

// enc is strict: a ticket has one spelling.
var enc = base64.RawURLEncoding.Strict()

// encodedLen is the length of every ticket.
var encodedLen = enc.EncodedLen(payloadLen) + 1 + enc.EncodedLen(macLen)

// Errors a ticket is refused with; both are the client's (403).
var (
	ErrMalformed = errors.New("ticket: malformed")
	ErrForged    = errors.New("ticket: not issued for this queue and user")
)

// Place is what a valid ticket tells: the place's sequence number in the
// queue of the given generation.
type Place struct {
	// Generation is the queue configuration's creation time (Unix ms; 0
	// for a queue created before generations were recorded).
	Generation int64
	// Seq is the place's sequence number: the line's order.
	Seq int64
}

// Signer signs with its first key and accepts a ticket signed by any.
type Signer struct {
	keys []*macs
}

// macs hands out HMAC-SHA256 states keyed with one key, each with its
// scratch space, so a check neither sets up a new state (that was half of
// a check's cost) nor allocates.
type macs struct{ pool sync.Pool }

// macState is one pooled HMAC state and the buffers it writes and sums into.
type macState struct {
	h   hash.Hash
	in  []byte
	sum []byte
}

func newMacs(key []byte) *macs {
	key = append([]byte(nil), key...)
	return &macs{pool: sync.Pool{New: func() any {
		return &macState{h: hmac.New(sha256.New, key), in: make([]byte, 0, 256), sum: make([]byte, 0, sha256.Size)}
	}}}
}

// equal reports whether sum is the MAC of payload for user in queue q.
func (m *macs) equal(sum []byte, q, user string, payload []byte) bool {
	st := m.pool.Get().(*macState)
	defer m.pool.Put(st)
	return hmac.Equal(sum, st.mac(q, user, payload))
}

// mac returns the MAC of payload for user in queue q, valid until st is
// used again.
func (st *macState) mac(q, user string, payload []byte) []byte {
	st.in = append(append(append(append(append(append(append(st.in[:0], domain...), 0), q...), 0), user...), 0), payload...)
	st.h.Reset()
	st.h.Write(st.in)
	st.sum = st.h.Sum(st.sum[:0])
	return st.sum[:macLen]
}

// NewSigner returns a Signer over keys, the first of which signs.
func NewSigner(keys ...[]byte) (*Signer, error) {
	if len(keys) == 0 {
		return nil, errors.New("ticket: at least one key is required")
	}
	s := &Signer{}
	for i, k := range keys {
		if len(k) < MinKeyBytes {
			return nil, fmt.Errorf("ticket: key %d must be at least %d bytes, got %d", i+1, MinKeyBytes, len(k))
		}
		s.keys = append(s.keys, newMacs(k))
	}
	return s, nil
}

// DeriveKey turns another secret (the HS256 JWT key every replica already
// shares) into a ticket key of its own, so one key never serves two
// purposes.
func DeriveKey(secret string) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte("waitingroom queue-ticket key v1"))
	return h.Sum(nil)
}

// Sign returns user's ticket for place p in queue q.
func (s *Signer) Sign(q, user string, p Place) string {
	payload := make([]byte, payloadLen)
	payload[0] = version
	binary.BigEndian.PutUint64(payload[1:9], uint64(p.Generation))
	binary.BigEndian.PutUint64(payload[9:17], uint64(p.Seq))
	st := s.keys[0].pool.Get().(*macState)
	defer s.keys[0].pool.Put(st)
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(st.mac(q, user, payload))
}

// Check returns the place t names, if t was signed for user in queue q by
// any of the keys.
func (s *Signer) Check(q, user, t string) (Place, error) {
	p, _, err := s.check(q, user, t)
	return p, err
}

// CheckCurrent is Check that also returns the ticket the holder should
// keep: t itself when the first key signed it, else the same place signed
// with the first key. An answer that hands back a ticket hands back this
// one, so during a rotation (the new key first, the old one still listed)
// every holder who polls moves to the new key before the old one is
// dropped, and an answer never carries a ticket of a key that no longer
// signs. A current ticket costs nothing more than Check.
func (s *Signer) CheckCurrent(q, user, t string) (Place, string, error) {
	p, key, err := s.check(q, user, t)
	if err != nil {
		return Place{}, "", err
	}
	if key > 0 {
		t = s.Sign(q, user, p)
	}
	return p, t, nil
}

// check returns the place t names and the index of the key that signed it.
func (s *Signer) check(q, user, t string) (Place, int, error) {
	if len(t) != encodedLen {
		return Place{}, 0, ErrMalformed
	}
	rawP, rawM, ok := strings.Cut(t, ".")
	if !ok || len(rawP) != enc.EncodedLen(payloadLen) || len(rawM) != enc.EncodedLen(macLen) {
		return Place{}, 0, ErrMalformed
	}
	// Decoded into arrays on the stack: a poll's check allocates nothing.
	var payload [payloadLen]byte
	if n, err := enc.Decode(payload[:], []byte(rawP)); err != nil || n != payloadLen || payload[0] != version {
		return Place{}, 0, ErrMalformed
	}
	var m [macLen]byte
	if n, err := enc.Decode(m[:], []byte(rawM)); err != nil || n != macLen {
		return Place{}, 0, ErrMalformed
	}
	for i, k := range s.keys {
		if k.equal(m[:], q, user, payload[:]) {
			p := Place{Generation: int64(binary.BigEndian.Uint64(payload[1:9])), Seq: int64(binary.BigEndian.Uint64(payload[9:17]))}
			if p.Generation < 0 || p.Seq <= 0 {
				return Place{}, 0, ErrMalformed // signed by us, so never: a key mix-up
			}
			return p, i, nil
		}
	}
	return Place{}, 0, ErrForged
}

func FromSettings(keys []string, jwtSecret, devSecret string, dev bool) (*Signer, error) {
	var raw [][]byte
	switch {
	case len(keys) > 0:
		for _, k := range keys {
			raw = append(raw, []byte(strings.TrimSpace(k)))
		}
	case jwtSecret != "":
		raw = [][]byte{DeriveKey(jwtSecret)}
	case dev:
		raw = [][]byte{DeriveKey(devSecret)}
	default:
		return nil, errors.New("TICKET_KEYS is required when AUTH_JWT_SECRET is not set")
	}
	s, err := NewSigner(raw...)
	if err != nil {
		return nil, fmt.Errorf("TICKET_KEYS: %w", err)
	}
	return s, nil
}
