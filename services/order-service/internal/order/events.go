package order

import "time"

// Event is a fact the order path records for the other services: Created
// or Failed. The adapters encode it (the outbox and the direct publisher,
// as the waitingroom.v1 message of the same name).
type Event interface {
	// EventID is derived from what the event reports, so recording the
	// same fact twice (the handler and the reaper, two reapers) yields one
	// event, and consumers drop the second.
	EventID() string
	// Attempt is the order attempt the event resolves: its order id (the
	// one consume took the token with). An attempt has one resolution, a
	// Created or a Failed, never both: the outbox holds one event per
	// attempt, so a Failed recorded for an attempt whose order committed
	// (the commit answered late) is refused with ErrOrderPlaced, and an
	// order whose attempt was recorded failed first cannot commit
	// (ErrAttemptFailed).
	Attempt() string
}

// Created reports a committed order (OrderCreated).
type Created struct {
	Order Order
}

// EventID is the order's id with ".created".
func (e Created) EventID() string { return e.Order.ID + ".created" }

// Attempt is the order's id.
func (e Created) Attempt() string { return e.Order.ID }

// Failed reports an attempt that consumed an entry token and placed no
// order (OrderFailed): the admission-dispatcher gives the token back when
// Restorable, and frees its slot otherwise.
type Failed struct {
	QueueID, UserID, TokenID string
	// OrderID is the id the attempt was given when it consumed the token.
	OrderID    string
	Reason     FailureReason
	Restorable bool
	// RemainingTTL is what the token had left when the attempt failed.
	RemainingTTL time.Duration
	At           time.Time
}

// EventID names the attempt: its token and order ids.
func (e Failed) EventID() string { return e.TokenID + ".failed." + e.OrderID }

// Attempt is the attempt's order id.
func (e Failed) Attempt() string { return e.OrderID }

// FailureReason says why an attempt failed; whether the token comes back is
// Failed.Restorable, the order path's policy, not the reason.
type FailureReason string

// Failure reasons, as OrderFailed names them.
const (
	ReasonSoldOut        FailureReason = "SOLD_OUT"
	ReasonDatabaseError  FailureReason = "DATABASE_ERROR"
	ReasonTimeout        FailureReason = "TIMEOUT"
	ReasonInvalidRequest FailureReason = "INVALID_REQUEST"
	ReasonAbandoned      FailureReason = "ABANDONED"
	ReasonOrderLimit     FailureReason = "ORDER_LIMIT_REACHED"
)

// failed is the Failed event for an attempt whose token expires at
// expires, failing now.
func failed(q, user, tokenID, orderID string, reason FailureReason, restorable bool, expires time.Time) Failed {
	now := time.Now().UTC()
	return Failed{QueueID: q, UserID: user, TokenID: tokenID, OrderID: orderID, Reason: reason,
		Restorable: restorable, RemainingTTL: max(expires.Sub(now), 0), At: now}
}
