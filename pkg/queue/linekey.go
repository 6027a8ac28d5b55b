package queue

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
)

// A person's line is a keyed hash of their user id: HMAC-SHA256 under the
// queue's line key, a secret made when the queue is created and kept in its
// config in Redis (which every service already trusts with the line itself).
// An unkeyed hash lets anyone compute a user id's line, so a crowd of junk
// ids could be sent into one line; nobody outside the services can tell
// which ids share a line here. (Admission by arrival, arrival.go, is what
// makes a long line no faster; the key keeps the lines a fair lottery.)

// LineKeyBytes is the size of a queue's line key.
const LineKeyBytes = 32

// ErrBadLineKey: a stored line key is not LineKeyBytes hex-encoded bytes.
var ErrBadLineKey = errors.New("line key: want 32 hex-encoded bytes")

// LineKey is a queue's secret for placing people in its lines. It prints,
// logs and marshals as "redacted", so it never reaches a log or a view by
// accident.
type LineKey []byte

// NewLineKey makes a queue's line key, hex-encoded as the config keeps it.
func NewLineKey() (string, error) {
	b := make([]byte, LineKeyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("line key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ParseLineKey reads a line key as the config keeps it; "" is no key (a
// queue split into lines before keys existed: see LineOf).
func ParseLineKey(s string) (LineKey, error) {
	if s == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != LineKeyBytes {
		return nil, ErrBadLineKey
	}
	return b, nil
}

func (LineKey) String() string               { return "redacted" }
func (LineKey) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, "redacted") }
func (LineKey) LogValue() slog.Value         { return slog.StringValue("redacted") }
func (LineKey) MarshalText() ([]byte, error) { return []byte("redacted"), nil }

// LineOf is the line of user in a queue of shards lines whose line key is
// key. A queue without a key (split into lines before keys existed, and not
// re-split since) keeps the unkeyed FNV-1a 32 it was routed by: moving its
// people to other lines mid-sale would lose their places.
func LineOf(key LineKey, user string, shards int) int {
	if shards <= 1 {
		return 0
	}
	if len(key) == 0 {
		h := fnv.New32a()
		h.Write([]byte(user))
		return int(h.Sum32() % uint32(shards))
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(user))
	return int(binary.BigEndian.Uint64(m.Sum(nil)) % uint64(shards))
}
