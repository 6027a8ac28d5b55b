package queue

import "time"

// Event types written to a queue's outbox.
const (
	EventTokenIssued   = "TokenIssued"
	EventTokenRestored = "TokenRestored"
	EventTokenExpired  = "TokenExpired"
	// EventQueueStarted: the start time came and the pre-queue closed;
	// carries the seed's SHA-256, before anyone is drawn.
	EventQueueStarted = "QueueStarted"
	// EventQueueDrawn: every pre-queued person has a place; carries the
	// seed.
	EventQueueDrawn = "QueueDrawn"
	// EventUserAbandoned: a person away (presence) past the queue's grace
	// was removed from the line; Seq is the place they lost.
	EventUserAbandoned = "UserAbandoned"
	// EventQueueChanged: an operator created the queue or changed its
	// knobs through the admin API; written with the change.
	EventQueueChanged = "QueueChanged"
	// EventQueueMinute: a line's figures of one minute (or, once the queue
	// is closed, of what it counted so far), for the history.
	EventQueueMinute = "QueueMinute"
)

// Event is one entry of a queue's outbox: a state change to be published.
// Its ID is derived from the token (and order), so a republished event has
// the same id and consumers can drop duplicates.
type Event struct {
	// StreamID is the outbox entry's id, for acknowledging it.
	StreamID string

	Type       string
	ID         string
	QueueID    string
	UserID     string
	TokenID    string
	OrderID    string
	Reason     string
	Seq        int64
	ActivateAt time.Time
	ExpiresAt  time.Time
	OccurredAt time.Time
	// RemainingTTL is set on TokenRestored.
	RemainingTTL time.Duration

	// The draw's events (QueueStarted, QueueDrawn) carry these.
	StartsAt   time.Time
	SeedSHA256 string
	// Seed is set on QueueDrawn only.
	Seed string
	// PreQueued is how many were pre-queued when the start came; Placed
	// how many of them got a place (QueueDrawn), with the sequence numbers
	// FirstSeq..LastSeq (TokenIssued.sequence in that range came from the
	// draw).
	PreQueued, Placed, FirstSeq, LastSeq int64

	// QueueChanged carries these: who (Actor, the admin's subject, from
	// Address), Created or changed, the knobs Before (none when created)
	// and After as JSON, and the new version's ETag; Outcome APPLIED, or
	// REFUSED with the Refusal (then After is the change asked for).
	Actor, Address, Before, After, ETag string
	// Created: the change made the queue; Closed: it was a close (the
	// admin API's DELETE); Worded: a change of the page's wording.
	Created, Closed, Worded bool
	Outcome, Refusal        string

	// QueueMinute carries these: the line (LineID), the minute's start
	// (Minute) and its figures.
	LineID string
	Minute time.Time
	Counts MinuteCounts

	// TraceParent and TraceState are the W3C trace context of what wrote
	// the event (the restore that a failed order's OrderFailed set off, the
	// admission tick), so its publish continues that trace however long
	// the event waited in the outbox. Empty when it was written untraced.
	TraceParent, TraceState string
}

// OutboxRead asks for one queue's outbox events.
type OutboxRead struct {
	QueueID string
	// Pending re-reads the events this consumer read before and did not
	// acknowledge (a publish that failed) instead of new ones.
	Pending bool
}

// OutboxBatch is what one read found in one queue's outbox, or why the
// read failed.
type OutboxBatch struct {
	QueueID string
	Events  []Event
	Err     error
}

// Change says who changes a queue's knobs, for its QueueChanged event:
// Actor is the operator's subject, Address where the request came from,
// Asked the request's knobs as sent (a JSON object), which a refusal
// records. A zero Change writes no event (a change made by the system
// itself).
type Change struct {
	Actor, Address, Asked string
	// Wording is the language of a change of the page's wording (empty for
	// a change of the knobs).
	Wording string
}

// MaxAsked bounds the change asked for that a refusal records: a larger
// request is recorded without it.
const MaxAsked = 8 << 10

// Change outcomes, as QueueChanged carries them.
const (
	ChangeApplied = "APPLIED"
	ChangeRefused = "REFUSED"
)

// MinuteCounts is what one line of a queue counted in one minute (see
// lua/prelude.lua, minute_add): the figures of the history and the sale
// report.
type MinuteCounts struct {
	Arrivals, Admitted, ExpiredUnused, Left, Abandoned int64
	// WaitHistogram counts the admitted people's waits per bucket (see
	// WaitBucketLow); WaitMax is the longest.
	WaitHistogram []int64
	WaitMax       time.Duration
}
