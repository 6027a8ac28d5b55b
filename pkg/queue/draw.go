package queue

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrStarted: the queue's start time has passed and its pre-queue was drawn
// (or is being drawn); its startsAt can no longer change.
var ErrStarted = errors.New("queue already started")

// DrawState is where a queue with a start time stands in its draw.
type DrawState string

// The draw states. A queue that never had a startsAt has none ("").
const (
	// DrawScheduled: a start time is set and has not come; entrants are
	// pre-queued, and the seed's SHA-256 is already published.
	DrawScheduled DrawState = "SCHEDULED"
	// DrawDrawing: the start came; the pre-queue is closed and being placed
	// in drawn order, and nobody is admitted until that is done.
	DrawDrawing DrawState = "DRAWING"
	// DrawDrawn: every pre-queued person has a place; the seed is published.
	DrawDrawn DrawState = "DRAWN"
)

// HeldDraw: the queue's pre-queue is being drawn; admission resumes when
// everyone has a place.
const HeldDraw = "DRAW"

// Draw is a queue's pre-queue draw as an auditor sees it.
type Draw struct {
	State DrawState
	// SeedSHA256 is the hex SHA-256 of the seed's bytes, published from the
	// moment the start time is set, before anyone is drawn.
	SeedSHA256 string
	// Seed is the hex seed, published once the draw is done (empty before).
	Seed string
	// PreQueued is how many wait for the start (SCHEDULED), or how many
	// were pre-queued when the start came.
	PreQueued int64
	// Placed is how many of them have been given a place so far (those who
	// left before their turn came are not placed).
	Placed int64
	// StartedAt is when the pre-queue closed, DrawnAt when the last place
	// was given (Redis time); zero before.
	StartedAt, DrawnAt time.Time
}

// DrawSeedBytes is the length of a draw seed.
const DrawSeedBytes = 32

// NewDrawSeed returns a fresh seed from crypto/rand and its SHA-256, both
// hex.
func NewDrawSeed() (seed, sha string, err error) {
	b := make([]byte, DrawSeedBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("draw seed: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(b), hex.EncodeToString(sum[:]), nil
}

// SeedSHA256 is the commitment published for seed (hex): the hex SHA-256
// of its bytes.
func SeedSHA256(seed string) (string, error) {
	b, err := hex.DecodeString(seed)
	if err != nil || len(b) != DrawSeedBytes {
		return "", fmt.Errorf("draw seed: want %d hex-encoded bytes", DrawSeedBytes)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// DrawKey is person user's draw key under seed (hex): HMAC-SHA256 keyed
// with the seed's bytes over the user id. The pre-queue is placed in
// ascending order of these keys, so anyone who knows the seed and two
// people's ids can check which of them was placed first.
func DrawKey(seed, user string) ([]byte, error) {
	b, err := hex.DecodeString(seed)
	if err != nil || len(b) != DrawSeedBytes {
		return nil, fmt.Errorf("draw seed: want %d hex-encoded bytes", DrawSeedBytes)
	}
	m := hmac.New(sha256.New, b)
	m.Write([]byte(user))
	return m.Sum(nil), nil
}

// DrawOrder returns users in drawn order: ascending DrawKey, ties (never
// seen: 256-bit keys) by user id. The order is a uniformly random
// permutation as long as the seed was unknown when the pre-queue closed,
// and it does not depend on the order users are given in, nor on when
// anyone arrived.
func DrawOrder(seed string, users []string) ([]string, error) {
	type keyed struct {
		user string
		key  []byte
	}
	ks := make([]keyed, len(users))
	for i, u := range users {
		k, err := DrawKey(seed, u)
		if err != nil {
			return nil, err
		}
		ks[i] = keyed{u, k}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.user, b.user)
	})
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.user
	}
	return out, nil
}

// DrawWork is what the leader needs to place a closed pre-queue.
type DrawWork struct {
	State DrawState
	// Seed is the draw's seed (hex); the leader orders by it.
	Seed string
	// PreQueued is how many are still to place; Remaining, when read,
	// names them (in no particular order).
	PreQueued int64
	Remaining []string
	// Placed is how many have a place so far.
	Placed int64
	// Count is how many were pre-queued when the pre-queue closed.
	Count int64
}

// DrawTotals are what a draw step of one line of a queue split into lines
// needs (zero for a queue of one line): Quiet writes no event (lines 1 and
// up); OthersPreQueued and OthersPlaced are the other lines' counts, which
// line 0's QueueStarted and QueueDrawn add to its own (the queue's totals).
type DrawTotals struct {
	Quiet                         bool
	OthersPreQueued, OthersPlaced int64
}
