package queue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Config holds a queue's knobs. Every field can be changed live.
//
// The comments are the knobs' documentation: make docs writes them into
// docs/CONFIGURATION.md and the gateway's OpenAPI document, a doc link to
// a constant ([MaxShards]) shown as its value, and a sentence "Valid from
// A to B" as the range.
type Config struct {
	// State is OPEN (takes entries and admits at the configured rate),
	// PAUSED (takes entries, admits nobody) or CLOSED (takes no new
	// entries; tokens already issued stay valid).
	State State `json:"state"`
	// AdmissionRatePerSec is how many people are let through per second.
	// FIXED: always this rate; ADAPTIVE: the rate it starts at, kept within
	// MinAdmissionRatePerSec and MaxAdmissionRatePerSec. The line's
	// capacity is computed from this configured rate, for an ADAPTIVE queue
	// too. Valid from [MinAdmissionRate] to [MaxAdmissionRate].
	AdmissionRatePerSec float64 `json:"admissionRatePerSec"`
	// MaxActive caps the slots held at once (tokens issued and orders in
	// flight); 0 means no cap. Valid from 0 (no cap) to [MaxMaxActive].
	MaxActive int64 `json:"maxActive"`
	// MaxQueueSize caps the waiting line. Valid from 1 to
	// [MaxMaxQueueSize].
	MaxQueueSize int64 `json:"maxQueueSize"`
	// MaxWaitSeconds caps the line further at MaxWaitSeconds x rate, so
	// nobody is given a place they would wait longer than this for: the
	// line holds at most min(MaxQueueSize, MaxWaitSeconds x
	// AdmissionRatePerSec), which must let at least one person wait. Valid
	// from 1 to [MaxMaxWaitSeconds].
	MaxWaitSeconds int64 `json:"maxWaitSeconds"`
	// TokenTTLSeconds is how long an entry token lives unused. Valid from
	// [MinTokenTTLSeconds] to [MaxTokenTTLSeconds].
	TokenTTLSeconds int64 `json:"tokenTtlSeconds"`
	// ActivationSpreadMs spreads one batch's activate-at times over this
	// window so a batch does not hit the order path in the same
	// millisecond. Valid from 0 to [MaxActivationSpreadMs], and below half
	// of TokenTTLSeconds, or tokens could expire before they activate.
	ActivationSpreadMs int64 `json:"activationSpreadMs"`
	// EnterChallenge is what a new entrant must show first: NONE, or
	// PROOF_OF_WORK, a solved proof-of-work challenge for a new place
	// (raised when bots show up).
	EnterChallenge EnterChallenge `json:"enterChallenge"`
	// PowDifficultyBits is the proof-of-work difficulty: leading zero bits,
	// about 2^bits hashes per entrant (each bit doubles the expected work).
	// A raise applies at once, refusing solutions of challenges issued at
	// the old difficulty, and never touches people already in line. Valid
	// from [MinPowDifficultyBits] to [MaxPowDifficultyBits].
	PowDifficultyBits int64 `json:"powDifficultyBits"`
	// MaxOrdersPerUser is how many orders one person may place in this
	// queue, over all their entries; 0 means no limit. The order-service
	// counts them in Postgres in the order transaction; beyond it the order
	// is refused with 409 order-limit-reached and the token is spent. Valid
	// from 0 (no limit) to [MaxMaxOrdersPerUser].
	MaxOrdersPerUser int64 `json:"maxOrdersPerUser"`
	// StartsAt, when set (RFC 3339), is when the sale starts: until then
	// entrants are pre-queued, and at StartsAt they are placed in a random
	// order, drawn from a seed committed when StartsAt was set (its SHA-256
	// published in the queue's draw), all ahead of anyone who enters after
	// it. null or "" removes it (the sale starts now: the pre-queue is
	// drawn at once), and the view omits it while unset. A new StartsAt in
	// the past or more than a year ahead is refused (400
	// validation-failed); once the start came it cannot change (409
	// queue-started; the same StartsAt passes). See the README's
	// "Scheduled drops".
	StartsAt time.Time `json:"startsAt,omitzero"`
	// AdmissionMode FIXED admits at AdmissionRatePerSec. ADAPTIVE: the
	// dispatcher leader steers the rate from the order-service's per-queue
	// health reports (order.health, one a second), aiming for order
	// transactions under TargetOrderLatencyMs at the 95th percentile. Once
	// per new report it cuts the rate to 0.7 of itself when the order
	// transactions' p95 is over TargetOrderLatencyMs, more than 2 % of the
	// order attempts were answered 503 or timed out, or more than 10,000
	// order events wait to be published, and waits 2 s before cutting
	// again; otherwise it adds a twentieth of (MaxAdmissionRatePerSec -
	// MinAdmissionRatePerSec). It starts from AdmissionRatePerSec, stays
	// within [MinAdmissionRatePerSec, MaxAdmissionRatePerSec], and holds
	// the rate when no report came for 5 s or no order finished in the
	// last interval. The rate and the reason are in the admin view's
	// effectiveRatePerSec and rateReason. See the README's "Adaptive
	// admission".
	AdmissionMode AdmissionMode `json:"admissionMode"`
	// MinAdmissionRatePerSec is, for an ADAPTIVE queue (validated always),
	// the rate the controller never admits slower than, however bad the
	// order path looks. Valid from [MinAdmissionRate] to
	// [MaxAdmissionRate].
	MinAdmissionRatePerSec float64 `json:"minAdmissionRatePerSec"`
	// MaxAdmissionRatePerSec is, for an ADAPTIVE queue (validated always),
	// the rate the controller never admits faster than. Valid from
	// [MinAdmissionRate] to [MaxAdmissionRate], and at least
	// MinAdmissionRatePerSec, else 400 validation-failed naming
	// MaxAdmissionRatePerSec.
	MaxAdmissionRatePerSec float64 `json:"maxAdmissionRatePerSec"`
	// TargetOrderLatencyMs is, for an ADAPTIVE queue, the order
	// transactions' 95th percentile (consume to answer, as the
	// order-service reports it) the controller keeps the order path under;
	// a report over it cuts the rate. Valid from [MinTargetOrderLatencyMs]
	// to [MaxTargetOrderLatencyMs].
	TargetOrderLatencyMs int64 `json:"targetOrderLatencyMs"`
	// FailMode is what the queue does while Redis, the line's store, is
	// unreachable. CLOSED: enter and position answer 503
	// backend-unavailable (nobody gets in, nobody is let through). OPEN:
	// enter and position answer 200 state BYPASS, the page goes straight to
	// the order form, and the order-service takes the queue's orders
	// without an entry token, held to AdmissionRatePerSec by a limiter per
	// replica, stock still in the database. Every service reads the mode
	// from configurations it refreshes every second, so a queue made or
	// changed less than a second before an outage may not be known yet
	// (503). Leave and the admin API answer 503 either way; when Redis is
	// back the line resumes. See the README's "Fail mode".
	FailMode FailMode `json:"failMode"`
	// Shards is how many sub-lines the line is split into, each in a
	// Redis Cluster hash slot of its own, so one sale's enters and
	// admissions spread over the cluster's masters (see docs/API.md,
	// "Sharding a queue", and pkg/queue/lines.go). A person's line is a
	// hash of their user id; each tick admits from each line its share of
	// the queue's earliest arrivals, never by the lines' lengths, so the
	// admission order follows the entry order within a stated bound (a
	// line made long by junk is no faster for anyone). Set it when creating the queue: it can change only
	// while nobody is in the queue (else 409 shards-fixed). With a
	// StartsAt, each line draws its own pre-queue with the queue's one
	// seed. Valid from 1 to [MaxShards].
	Shards int `json:"shards"`
	// AwayAfterSeconds turns presence on: a person whose client showed
	// no sign of life (an enter, a poll, an open event stream) for this
	// long is away, and admission passes over them without a token, the
	// next present people taking their turn in the same tick; positions
	// and wait estimates count only present people ahead. The suggested
	// poll interval stays under a third of it (less a second), so a person
	// who follows the server is never away, even with a poll lost. Nobody
	// is made away in a line that got no sightings for 3 s
	// (PresenceStaleAfter). 0 turns
	// presence off (the default); on, it is at least
	// [MinAwayAfterSeconds]. See docs/DESIGN.md, "Presence". Valid from 0
	// to [MaxAwayAfterSeconds].
	AwayAfterSeconds int64 `json:"awayAfterSeconds"`
	// AwayGraceSeconds is how long after being passed over an away person
	// may come back and be admitted at once, ahead of everyone who entered
	// after them; past it they are out of the line (ABANDONED, a
	// UserAbandoned event) and entering again goes to the back. It follows
	// AwayAfterSeconds (a change of that knob sets it too) until it is set
	// itself. Valid from 0 to [MaxAwayGraceSeconds].
	AwayGraceSeconds int64 `json:"awayGraceSeconds"`
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
	MinAwayAfterSeconds     = 5
	MaxAwayAfterSeconds     = 3600
	MaxAwayGraceSeconds     = 24 * 3600
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
	if c.AwayAfterSeconds != 0 && (c.AwayAfterSeconds < MinAwayAfterSeconds || c.AwayAfterSeconds > MaxAwayAfterSeconds) {
		add("awayAfterSeconds", "must be 0 (off) or between %d and %d", MinAwayAfterSeconds, MaxAwayAfterSeconds)
	}
	if c.AwayGraceSeconds < 0 || c.AwayGraceSeconds > MaxAwayGraceSeconds {
		add("awayGraceSeconds", "must be between 0 and %d", MaxAwayGraceSeconds)
	}
	if c.MaxOrdersPerUser < 0 || c.MaxOrdersPerUser > MaxMaxOrdersPerUser {
		add("maxOrdersPerUser", "must be between 0 (no limit) and %d", MaxMaxOrdersPerUser)
	}
	return errs
}

// ETag is a strong validator of c: the same knobs give the same tag, any
// change another. The admin API sends it, and takes it back in If-Match so
// that two operators do not overwrite each other's change unseen.
func (c Config) ETag() string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("queue: config does not marshal: %v", err)) // plain fields: cannot happen
	}
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}
