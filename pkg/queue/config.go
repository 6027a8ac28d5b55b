package queue

import (
	"fmt"
	"math"
	"time"
)

// Config holds a queue's knobs. Every field can be changed live.
type Config struct {
	State State `json:"state"`
	// AdmissionRatePerSec is how many people are let through per second.
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`
	// MaxActive caps the slots held at once (tokens issued and orders in
	// flight); 0 means no cap.
	MaxActive int64 `json:"maxActive"`
	// MaxQueueSize caps the waiting line.
	MaxQueueSize int64 `json:"maxQueueSize"`
	// MaxWaitSeconds caps the line further at MaxWaitSeconds x rate, so nobody
	// is given a place they would wait longer than this for.
	MaxWaitSeconds int64 `json:"maxWaitSeconds"`
	// TokenTTLSeconds is how long an entry token lives unused.
	TokenTTLSeconds int64 `json:"tokenTtlSeconds"`
	// ActivationSpreadMs spreads one batch's activate-at times over this window
	// so a batch does not hit the order path in the same millisecond.
	ActivationSpreadMs int64 `json:"activationSpreadMs"`
	// EnterChallenge is what a new entrant must show first: nothing, or a
	// solved proof-of-work challenge (raised when bots show up).
	EnterChallenge EnterChallenge `json:"enterChallenge"`
	// PowDifficultyBits is the proof-of-work difficulty: leading zero bits,
	// about 2^bits hashes per entrant. Raising it refuses solutions of
	// challenges issued at the old difficulty.
	PowDifficultyBits int64 `json:"powDifficultyBits"`
	// MaxOrdersPerUser is how many orders one person may place in this
	// queue, over all their entries; 0 means no limit. The order-service
	// enforces it in the order transaction.
	MaxOrdersPerUser int64 `json:"maxOrdersPerUser"`
	// StartsAt, when set, is when the sale starts: until then entrants are
	// pre-queued, and at StartsAt they are placed in a random order (drawn
	// from a seed committed when StartsAt was set), all ahead of anyone
	// who enters after it. It can change until the start, not after.
	StartsAt time.Time `json:"startsAt,omitzero"`
	// AdmissionMode FIXED admits at AdmissionRatePerSec; ADAPTIVE starts
	// there and follows the order path's health between
	// MinAdmissionRatePerSec and MaxAdmissionRatePerSec, aiming for order
	// transactions under TargetOrderLatencyMs at the 95th percentile.
	AdmissionMode          AdmissionMode `json:"admissionMode"`
	MinAdmissionRatePerSec float64       `json:"minAdmissionRatePerSec"`
	MaxAdmissionRatePerSec float64       `json:"maxAdmissionRatePerSec"`
	TargetOrderLatencyMs   int64         `json:"targetOrderLatencyMs"`
	// FailMode is what the queue does while Redis is unreachable: CLOSED
	// answers 503 (nobody gets in, nobody is let through), OPEN lets
	// people straight to the order form (BYPASS), each order-service
	// replica holding the queue's orders to its admission rate.
	FailMode FailMode `json:"failMode"`
	// Shards is how many sub-lines the line is split into, each in a
	// Redis Cluster hash slot of its own (1 to MaxShards): one sale's
	// enters and admissions then spread over the cluster's masters. It is
	// fixed while anyone is in the queue (see lines.go).
	Shards int `json:"shards"`
}

// FailMode is a queue's answer to a Redis outage.
type FailMode string

// The fail modes.
const (
	FailClosed FailMode = "CLOSED"
	FailOpen   FailMode = "OPEN"
)

// Valid reports whether m is a known fail mode.
func (m FailMode) Valid() bool { return m == FailClosed || m == FailOpen }

// AdmissionMode is how a queue's admission rate is set.
type AdmissionMode string

// The admission modes.
const (
	// AdmissionFixed: the configured rate, always.
	AdmissionFixed AdmissionMode = "FIXED"
	// AdmissionAdaptive: a rate the dispatcher steers by the order path's
	// health reports.
	AdmissionAdaptive AdmissionMode = "ADAPTIVE"
)

// Valid reports whether m is a known mode.
func (m AdmissionMode) Valid() bool { return m == AdmissionFixed || m == AdmissionAdaptive }

// EnterChallenge is a queue's challenge at enter.
type EnterChallenge string

// The enter challenges.
const (
	ChallengeNone        EnterChallenge = "NONE"
	ChallengeProofOfWork EnterChallenge = "PROOF_OF_WORK"
)

// Valid reports whether c is a known challenge.
func (c EnterChallenge) Valid() bool { return c == ChallengeNone || c == ChallengeProofOfWork }

// Bounds of the knobs. Values outside them are operator mistakes, not tuning.
const (
	MinAdmissionRate        = 0.01
	MaxAdmissionRate        = 100_000
	MaxMaxActive            = 10_000_000
	MaxMaxQueueSize         = 50_000_000
	MaxMaxWaitSeconds       = 7 * 24 * 3600
	MinTokenTTLSeconds      = 1
	MaxTokenTTLSeconds      = 24 * 3600
	MaxActivationSpreadMs   = 60_000
	MinPowDifficultyBits    = 1
	MaxPowDifficultyBits    = 32
	MaxMaxOrdersPerUser     = 1000
	MinTargetOrderLatencyMs = 10
	MaxTargetOrderLatencyMs = 60_000
	// MaxStartsAhead is the furthest ahead a start time may be set.
	MaxStartsAhead = 366 * 24 * time.Hour
)

// DefaultConfig is what a new queue starts with: ~175 orders/s (a 40-connection
// pool at ~200 ms per order, with a 30 % margin), a 5-minute token, a 2-second
// activation spread.
func DefaultConfig() Config {
	return Config{
		State:               Open,
		AdmissionRatePerSec: 175,
		MaxActive:           0,
		MaxQueueSize:        100_000,
		MaxWaitSeconds:      600,
		TokenTTLSeconds:     300,
		ActivationSpreadMs:  2000,
		EnterChallenge:      ChallengeNone,
		PowDifficultyBits:   16,

		AdmissionMode:          AdmissionFixed,
		MinAdmissionRatePerSec: 10,
		MaxAdmissionRatePerSec: 175,
		TargetOrderLatencyMs:   500,
		FailMode:               FailClosed,
		Shards:                 1,
	}
}

// Capacity is the most people the line may hold:
// min(MaxQueueSize, MaxWaitSeconds x AdmissionRatePerSec).
func (c Config) Capacity() int64 {
	byWait := math.Floor(float64(c.MaxWaitSeconds) * c.AdmissionRatePerSec)
	if byWait < float64(c.MaxQueueSize) {
		return int64(byWait)
	}
	return c.MaxQueueSize
}

// FieldError is one invalid knob.
type FieldError struct {
	Field   string
	Message string
}

// Validate returns every invalid field, or nil.
func (c Config) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if !c.State.Valid() {
		add("state", "must be OPEN, PAUSED or CLOSED")
	}
	if math.IsNaN(c.AdmissionRatePerSec) || c.AdmissionRatePerSec < MinAdmissionRate || c.AdmissionRatePerSec > MaxAdmissionRate {
		add("admissionRatePerSec", "must be between %g and %d", MinAdmissionRate, MaxAdmissionRate)
	}
	if c.MaxActive < 0 || c.MaxActive > MaxMaxActive {
		add("maxActive", "must be between 0 (no cap) and %d", MaxMaxActive)
	}
	if c.MaxQueueSize < 1 || c.MaxQueueSize > MaxMaxQueueSize {
		add("maxQueueSize", "must be between 1 and %d", MaxMaxQueueSize)
	}
	if c.MaxWaitSeconds < 1 || c.MaxWaitSeconds > MaxMaxWaitSeconds {
		add("maxWaitSeconds", "must be between 1 and %d", MaxMaxWaitSeconds)
	}
	if len(errs) == 0 && c.Capacity() < 1 {
		add("maxWaitSeconds", "maxWaitSeconds x admissionRatePerSec must let at least one person wait")
	}
	if c.TokenTTLSeconds < MinTokenTTLSeconds || c.TokenTTLSeconds > MaxTokenTTLSeconds {
		add("tokenTtlSeconds", "must be between %d and %d", MinTokenTTLSeconds, MaxTokenTTLSeconds)
	}
	if c.ActivationSpreadMs < 0 || c.ActivationSpreadMs > MaxActivationSpreadMs {
		add("activationSpreadMs", "must be between 0 and %d", MaxActivationSpreadMs)
	} else if c.TokenTTLSeconds >= MinTokenTTLSeconds && c.ActivationSpreadMs >= c.TokenTTLSeconds*1000/2 {
		add("activationSpreadMs", "must be less than half of tokenTtlSeconds, or tokens could expire before they activate")
	}
	if !c.EnterChallenge.Valid() {
		add("enterChallenge", "must be NONE or PROOF_OF_WORK")
	}
	if c.PowDifficultyBits < MinPowDifficultyBits || c.PowDifficultyBits > MaxPowDifficultyBits {
		add("powDifficultyBits", "must be between %d and %d", MinPowDifficultyBits, MaxPowDifficultyBits)
	}
	if !c.FailMode.Valid() {
		add("failMode", "must be CLOSED or OPEN")
	}
	if !c.AdmissionMode.Valid() {
		add("admissionMode", "must be FIXED or ADAPTIVE")
	}
	rateOK := func(f float64) bool { return !math.IsNaN(f) && f >= MinAdmissionRate && f <= MaxAdmissionRate }
	if !rateOK(c.MinAdmissionRatePerSec) {
		add("minAdmissionRatePerSec", "must be between %g and %d", MinAdmissionRate, MaxAdmissionRate)
	}
	if !rateOK(c.MaxAdmissionRatePerSec) {
		add("maxAdmissionRatePerSec", "must be between %g and %d", MinAdmissionRate, MaxAdmissionRate)
	} else if rateOK(c.MinAdmissionRatePerSec) && c.MaxAdmissionRatePerSec < c.MinAdmissionRatePerSec {
		add("maxAdmissionRatePerSec", "must be at least minAdmissionRatePerSec")
	}
	if c.TargetOrderLatencyMs < MinTargetOrderLatencyMs || c.TargetOrderLatencyMs > MaxTargetOrderLatencyMs {
		add("targetOrderLatencyMs", "must be between %d and %d", MinTargetOrderLatencyMs, MaxTargetOrderLatencyMs)
	}
	if c.Shards < 1 || c.Shards > MaxShards {
		add("shards", "must be between 1 and %d", MaxShards)
	}
	if c.MaxOrdersPerUser < 0 || c.MaxOrdersPerUser > MaxMaxOrdersPerUser {
		add("maxOrdersPerUser", "must be between 0 (no limit) and %d", MaxMaxOrdersPerUser)
	}
	return errs
}
