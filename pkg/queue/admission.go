package queue

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"
)

// Admission errors.
var (
	// ErrStaleEpoch: the caller's fencing epoch is not the queue's current
	// one; it has lost the lead and must stop issuing.
	ErrStaleEpoch = errors.New("stale leader epoch")
	// ErrInvalidToken: no such token for this user and queue, a wrong
	// secret, or an expired one.
	ErrInvalidToken = errors.New("invalid entry token")
	// ErrLate: a state-changing request reached Redis after its caller had
	// given up on it (past its deadline by Redis TIME), or after a later
	// request of the same kind had been applied (a tick older than the last
	// applied one); it was refused and changed nothing. It is an
	// ErrUnavailable: the call may be made again, fresh.
	ErrLate = fmt.Errorf("%w: the request arrived late and was refused", ErrUnavailable)
	// ErrNotReplicated: the change was made on the Redis primary but not
	// enough replicas confirmed it within the wait (REDIS_WAIT_REPLICAS,
	// REDIS_WAIT_TIMEOUT), so a failover could still undo it: it is not
	// acknowledged. Every such call is safe to make again (a repeat answers
	// the first one's result and waits for the replicas again); it is an
	// ErrUnavailable.
	ErrNotReplicated = fmt.Errorf("%w: the change is not on the replicas yet", ErrUnavailable)
)

// NotActiveError: the token is valid but its activate-at lies ahead.
type NotActiveError struct{ Wait time.Duration }

func (e *NotActiveError) Error() string {
	return fmt.Sprintf("entry token not active for another %v", e.Wait)
}

// TokenCheck is what the order path's cheap, read-only check found for a
// presented entry token (see redisstore's check script). Consume stays the
// authority: a VALID check may still lose the race to consume.
type TokenCheck struct {
	State TokenCheckState
	// Wait is how long until a NOT_ACTIVE token activates.
	Wait time.Duration
}

// TokenCheckState sorts order requests before anything is charged.
type TokenCheckState string

// The states of a TokenCheck.
const (
	// TokenValid: the user's token for this queue, active and unexpired.
	TokenValid TokenCheckState = "VALID"
	// TokenNotActive: the user's token, but its activate-at lies ahead.
	TokenNotActive TokenCheckState = "NOT_ACTIVE"
	// TokenSpent: the token this user last consumed in this queue: its
	// holder retrying an order, who may have a stored answer replayed.
	TokenSpent TokenCheckState = "SPENT"
	// TokenInvalid: none of the above.
	TokenInvalid TokenCheckState = "INVALID"
)

// Grant is a fresh token the issuer hands to the issue operation: a 128-bit
// secret (only its holder ever sees it) and a 128-bit public id.
type Grant struct {
	Secret  string
	TokenID string
}

// NewGrant makes a grant from crypto/rand.
func NewGrant() (Grant, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Grant{}, fmt.Errorf("token: %w", err)
	}
	return Grant{
		Secret:  base64.RawURLEncoding.EncodeToString(b[:16]),
		TokenID: hex.EncodeToString(b[16:]),
	}, nil
}

// Grants makes n grants from one crypto/rand read.
func Grants(n int) ([]Grant, error) {
	b := make([]byte, 32*n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	out := make([]Grant, n)
	for i := range out {
		c := b[32*i : 32*(i+1)]
		out[i] = Grant{Secret: base64.RawURLEncoding.EncodeToString(c[:16]), TokenID: hex.EncodeToString(c[16:])}
	}
	return out, nil
}

// IssueRequest is one leader tick.
type IssueRequest struct {
	// Epoch is the leader's fencing epoch.
	Epoch int64
	// Tick is the configured tick; the batch cap is counted in it.
	Tick time.Duration
	// OutboxBound holds admission while the queue's outbox has this many
	// unpublished events (0: no bound).
	OutboxBound int64
	// Grants are the fresh tokens the tick may hand out, one per admission.
	Grants []Grant
	// Rate, for an ADAPTIVE queue, is the rate its controller proposes
	// (kept within the queue's range), and RateReason why; 0 keeps the
	// recorded one. A FIXED queue ignores it.
	Rate       float64
	RateReason string
	// Share is the line's part of the queue's rate, for a line of a queue
	// split into lines (ArrivalShares); 0 is all of it.
	Share float64
	// Heads, for a line of a queue split into lines, asks the tick for the
	// enter times of this many of the people still waiting after it
	// (ArrivalWindow); 0 for none.
	Heads int
	// TraceParent and TraceState are the tick's W3C trace context ('' for
	// none): the events it writes carry them (Event.TraceParent).
	TraceParent, TraceState string
	// History has the tick send the line's finished minutes to the outbox
	// (QueueMinute; a closed queue's, all it counted). The dispatcher's
	// ticks do; a caller that relays no events leaves them in Redis, where
	// they go with the queue.
	History bool
	// OrderPath, when set, is recorded with the tick for the admin view
	// (Stats.OrderPath): the order path's health from the leader's
	// reports.
	OrderPath *OrderPath
}

// Why a tick admitted nobody although the queue is open.
const (
	// HeldOutboxBacklog: the outbox holds OutboxBound events the broker
	// has not confirmed; admission resumes as the relay drains it.
	HeldOutboxBacklog = "OUTBOX_BACKLOG"
)

// IssueResult is what one leader tick did.
type IssueResult struct {
	// Paused: the queue is not OPEN; nothing was issued.
	Paused bool
	// Held names why an open queue admitted nobody (HeldOutboxBacklog), or
	// is empty.
	Held string
	// Gone: the queue was closed and its last token, order and event are
	// done with; its keys were deleted.
	Gone bool
	// Issued tokens, and slots pruned as no-shows, this tick.
	Issued, Expired int
	// Waiting is the line's length after the tick.
	Waiting int64
	// Rate is the admission rate the tick used (the configured one, or an
	// ADAPTIVE queue's effective one), so the next tick knows how many
	// grants to supply.
	Rate float64
	// Mode is the queue's admission mode; MinRate, MaxRate and
	// TargetLatency its ADAPTIVE knobs, for the leader's controller.
	Mode             AdmissionMode
	MinRate, MaxRate float64
	TargetLatency    time.Duration
	// ConfigVersion is the version of the config the tick read: the line's
	// copy, for a line of a queue split into lines (a copy behind the
	// queue's is written again by the leader).
	ConfigVersion int64
	// Interval is the time since the queue's last tick that admitted or
	// was paused, whichever leader ran it (0 for its first): how late the
	// head of the line was let through. A tick held, or missed while no
	// leader ran, makes the next interval long.
	Interval time.Duration
	// Traces are the traceparents kept for the people admitted (their
	// enter was sampled): the tick links its span to them.
	Traces []string
	// HeadsRead: the tick read the enter times of the first people still
	// waiting, Heads (µs, in the line's order, 0 for none recorded), as
	// IssueRequest.Heads asked; a tick that admitted nobody for a reason
	// (paused, held) or a repeated tick reads none.
	HeadsRead bool
	Heads     []int64
}

// RestoreOutcome is what a restore did.
type RestoreOutcome string

// Restore outcomes.
const (
	// Restored: the token is back with its remaining TTL, slot kept.
	Restored RestoreOutcome = "RESTORED"
	// RestoreExpired: the token's expiry passed meanwhile; the slot is freed.
	RestoreExpired RestoreOutcome = "EXPIRED"
	// Freed: a non-restorable failure; the slot is freed.
	Freed RestoreOutcome = "FREED"
	// Duplicate: already handled (a redelivery); nothing changed.
	Duplicate RestoreOutcome = "DUPLICATE"
)

// Consumed is a token taken by the order path.
type Consumed struct {
	TokenID    string
	ActivateAt time.Time
	ExpiresAt  time.Time
	// MaxOrders is the queue's maxOrdersPerUser when the token was
	// consumed: how many orders the order transaction lets this person
	// have in the queue, 0 for no limit.
	MaxOrders int64
}

// InflightToken is a consumed token whose order is not settled yet.
type InflightToken struct {
	TokenID  string
	UserID   string
	OrderID  string
	Deadline time.Time
	// ExpiresAt is the token's own expiry, for the remaining TTL.
	ExpiresAt time.Time
}

// BatchCap is the most one tick of length tick may admit at rate per second:
// ceil(rate x tick) + 1, the bound the issue operation applies.
func BatchCap(rate float64, tick time.Duration) int {
	return int(math.Ceil(rate*tick.Seconds())) + 1
}

// CatchUpSpan is the longest span one tick of length tick makes up for:
// ten ticks, and never less than a second. A leader that was gone longer
// (a failover) catches up this much, not everything; a slow tick, up to a
// second, makes up all of its time, at a tick of 50 ms as at one of 100 ms
// (ten 50 ms ticks alone would drop what a tick of 600 ms, Redis busy,
// should have admitted). The issue operation applies the same bound.
func CatchUpSpan(tick time.Duration) time.Duration {
	return max(10*tick, time.Second)
}

// GrantsFor is how many grants a tick needs to admit what the issue
// operation may allow: the batch cap over the span since the last applied
// tick, at least one tick and at most CatchUpSpan. since <= 0 means unknown
// (a new leader): the most a tick can admit.
func GrantsFor(rate float64, tick, since time.Duration) int {
	span := CatchUpSpan(tick)
	if since > 0 {
		// A quarter more than measured: Redis's clock between two ticks may
		// run a little longer than ours did.
		span = min(max(since+since/4, tick), span)
	}
	return BatchCap(rate, span)
}

// IssueCall is one queue's tick in a round that ticks many queues at once.
type IssueCall struct {
	QueueID string
	// Line is the line ticked, of a queue split into lines (0: the queue's
	// own). Its tokens name it (LineToken).
	Line int
	IssueRequest
}

// IssueReply is the outcome of one IssueCall: its result, or why it failed
// (queue.ErrStaleEpoch, queue.ErrNotFound, queue.ErrUnavailable, ...).
type IssueReply struct {
	IssueResult
	Err error
}

// Lease is a dispatcher's hold on one queue: its fencing epoch.
type Lease struct {
	QueueID string
	Epoch   int64
}

// LineLease is a leader's epoch to raise a line of its queue to (the
// queue's lines 1 and up follow line 0's lease).
type LineLease struct {
	QueueID string
	Line    int
	Epoch   int64
}

// LeaseReply is the outcome of acquiring or renewing one lease: the epoch
// held (0: someone else holds it, or it was lost), or why the call failed
// (queue.ErrNotFound for a queue without configuration).
type LeaseReply struct {
	Epoch int64
	Err   error
}
