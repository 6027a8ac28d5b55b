// Package queue holds what a waiting line is: its knobs, the states a user can be
// in, and the rules for estimated wait and polling interval. It knows nothing of
// Redis or HTTP; adapters translate.
package queue

import (
	"errors"
	"fmt"
	"time"
)

// Domain errors. Adapters wrap them; the HTTP edge switches on them once.
var (
	ErrNotFound    = errors.New("queue not found")
	ErrClosed      = errors.New("queue closed")
	ErrFull        = errors.New("queue full")
	ErrUnavailable = errors.New("backend unavailable")
	// ErrOverloaded: this process could not even ask its backend, every
	// connection of its pool being busy (go-redis's pool timeout). It is
	// an ErrUnavailable, so every edge still answers 503 with Retry-After,
	// but it says the process is overloaded, not that the backend is down:
	// the order path's health reports do not count it, and a queue that
	// fails OPEN is not bypassed for it.
	ErrOverloaded = fmt.Errorf("%w: overloaded", ErrUnavailable)
	// ErrChallengeRequired: the queue asks new entrants for a solved
	// challenge, and none came.
	ErrChallengeRequired = errors.New("enter challenge required")
	// ErrChallengeFailed: the solution shown is wrong, expired, used
	// before, or for a lower difficulty than the queue's current one.
	ErrChallengeFailed = errors.New("enter challenge failed")
)

// Proof is a solved enter challenge whose signature and work the gateway
// checked; the enter operation accepts it once, at the queue's current
// difficulty or above.
type Proof struct {
	// ID names the challenge (its single use is recorded under it).
	ID string
	// Bits is the difficulty the challenge was issued at.
	Bits int
	// ExpiresAt is when the challenge expires.
	ExpiresAt time.Time
}

// ValidID reports whether id is an acceptable queue id, ^[a-z0-9][a-z0-9-]{0,63}$.
// Ids are lower case so a queue cannot be split in two by spelling, and never
// contain braces, so the Redis hash tag {id} is always the whole id. (A loop,
// not a regexp: every request checks one, and a regexp was 3 % of a poll.)
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 64 || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ValidUserID reports whether id is an acceptable user id: the sub claim of
// a token, the member of a line, the buyer of an order. 1 to 128 bytes of
// A-Z, a-z, 0-9 and _ . : @ | - ('|' for Auth0's "auth0|..." subjects):
// nothing that would break the Redis keys and log lines it ends up in.
func ValidUserID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '.' || c == ':' || c == '@' || c == '|' || c == '-') {
			return false
		}
	}
	return true
}

// State is a queue's operating state.
type State string

// Queue states.
const (
	// Open accepts entries and admits at the configured rate.
	Open State = "OPEN"
	// Paused accepts entries but admits nobody.
	Paused State = "PAUSED"
	// Closed accepts no new entries; tokens already issued stay valid.
	Closed State = "CLOSED"
)

// Valid reports whether s is a known state.
func (s State) Valid() bool { return s == Open || s == Paused || s == Closed }

// UserState is where a user stands with respect to one queue.
type UserState string

// User states, as the API names them.
const (
	Waiting UserState = "WAITING"
	// PreQueue: entered before the queue's start time; placed by the draw
	// at the start.
	PreQueue UserState = "PRE_QUEUE"
	// Bypass: Redis is unreachable and the queue fails OPEN: go straight
	// to the order form; the order-service holds orders to the queue's rate.
	Bypass     UserState = "BYPASS"
	Admitted   UserState = "ADMITTED"
	Expired    UserState = "EXPIRED"
	Ordered    UserState = "ORDERED"
	NotInQueue UserState = "NOT_IN_QUEUE"
	// Abandoned: away (presence) past the queue's grace, out of the line;
	// entering again goes to the back.
	Abandoned UserState = "ABANDONED"
)

// Token is an entry token as its holder sees it. Secret is only ever returned
// to the user it belongs to, never published.
type Token struct {
	Secret     string
	ID         string
	ActivateAt time.Time
	ExpiresAt  time.Time
}

// Standing is one user's place with respect to a queue, read in one round trip.
type Standing struct {
	QueueID    string
	State      UserState
	QueueState State
	// Position is 1-based; 0 unless State is Waiting.
	Position int64
	// Total is the number of people waiting in the queue.
	Total int64
	// Token is set when State is Admitted, unless the token was already
	// presented to the order service and the order is in flight (Ordering).
	Token    *Token
	Ordering bool
	// ConfiguredRate and MeasuredRate are admissions per second. MeasuredRate
	// is 0 until a dispatcher has measured one recently.
	ConfiguredRate float64
	MeasuredRate   float64
	// LeaveShare is the measured share of people who left this queue's
	// line before their turn (of all who left or were admitted), 0 until
	// enough have: the wait estimate expects that share of the people
	// ahead not to be there.
	LeaveShare float64
	// StartsAt is the queue's start time, zero when it has none. StartsIn
	// is the time left until it by Redis's clock (0 once it passed), and
	// PreQueued how many wait for it (pre-queued and not yet placed).
	StartsAt  time.Time
	StartsIn  time.Duration
	PreQueued int64
	// Seq is the place's sequence number and Generation the queue
	// configuration's creation time (ms), when the read returned them (a
	// WAITING enter, or a position read that asked): what a ticket binds.
	// Ticket is the holder's signed ticket, set by the gateway.
	Seq, Generation int64
	Ticket          string
	// Line is the sub-line the holder is in (0 for a queue not split):
	// Seq counts in it. Lines is the queue's line count (0 or 1: not split).
	Line, Lines int
	// MaxPoll bounds the poll interval the holder is told (MaxPollFor of
	// a queue with presence on, set by the gateway); 0: no bound.
	MaxPoll time.Duration
}

// Ahead is the number of people in front of the user.
func (s Standing) Ahead() int64 {
	if s.Position <= 0 {
		return 0
	}
	return s.Position - 1
}

// Stats are a queue's live figures.
type Stats struct {
	Waiting      int64
	Active       int64
	IssuedTotal  int64
	MeasuredRate float64
	// Held says why an open queue admits nobody right now (see
	// HeldOutboxBacklog); empty when it admits.
	Held string
	// Draw is the pre-queue draw of a queue that has (or had) a start
	// time; nil for one that never had.
	Draw *Draw
	// EffectiveRate is an ADAPTIVE queue's admission rate as its leader
	// last set it (0 until one did, and for a FIXED queue), RateReason why.
	EffectiveRate float64
	RateReason    string
	// Lines are the figures of each line of a queue split into lines (nil
	// for one that is not); the queue's are their sums.
	Lines []LineStats
	// LineMasters is, on a Redis Cluster, how many masters serve the
	// queue's lines (0 on one Redis, and for a queue not split): fewer
	// than min(lines, masters) means lines share a master (after slots
	// moved) and the split does less than it could.
	LineMasters int
	// Presence: the queue's away people and what became of them (zero
	// with presence off).
	Presence Presence
	// OrderPath is the order path's health as the leader last recorded
	// it (At zero: never, or not in the last OrderPathFresh).
	OrderPath OrderPath
}

// OrderPathFresh is how long a recorded order-path health is shown.
const OrderPathFresh = 5 * time.Second

// Presence is a queue's away people now and its presence counters.
type Presence struct {
	// Away is how many are out of the line for being away, Skipped how
	// many of them had their place passed (in their grace).
	Away, Skipped int64
	// AwayTotal counts every time someone went away, CameBackTotal every
	// return to a kept place, AbandonedTotal those removed after the grace.
	AwayTotal, CameBackTotal, AbandonedTotal int64
}

// Add is p plus o.
func (p Presence) Add(o Presence) Presence {
	return Presence{Away: p.Away + o.Away, Skipped: p.Skipped + o.Skipped, AwayTotal: p.AwayTotal + o.AwayTotal,
		CameBackTotal: p.CameBackTotal + o.CameBackTotal, AbandonedTotal: p.AbandonedTotal + o.AbandonedTotal}
}

// Sightings is what one batch of sightings did: people seen, and away
// people who came back to their place.
type Sightings struct {
	Seen, CameBack int64
}

// LineStats are one line's live figures.
type LineStats struct {
	Line         int
	Waiting      int64
	Active       int64
	IssuedTotal  int64
	MeasuredRate float64
	Held         string
	// LineNode is where the line's keys are, on a Redis Cluster.
	LineNode
}

// LineNode is where a line's keys are on a Redis Cluster: their slot, the
// address of the master serving it, and how many masters the cluster has
// (all zero on one Redis).
type LineNode struct {
	Slot    int
	Node    string
	Masters int
}
