package app

import (
	"errors"
	"strings"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Metrics observes what the gateway's requests come to; wire implements it
// with Prometheus series. Its methods are called from many requests at once
// and must not block.
type Metrics interface {
	// Entered: an enter request came to outcome: the standing's state in
	// lower case (waiting, admitted, bypass, ...) or why it was refused (full,
	// closed, not_found, challenge_required, challenge_failed,
	// rate_limited, unavailable, invalid, error).
	Entered(outcome string)
	// Positioned: a position request came to outcome, named as Entered's.
	Positioned(outcome string)
	// ChallengeIssued: an enter challenge was handed out.
	ChallengeIssued()
	// PositionRead: a position request with valid ids was answered from
	// source: "frontier" (memory, a ticket far from the front) or "store"
	// (Redis).
	PositionRead(source string)
}

// Where a position answer came from (Metrics.PositionRead).
const (
	readFrontier = "frontier"
	readStore    = "store"
)

// nopMetrics records nothing: the Service's Metrics when given none.
type nopMetrics struct{}

func (nopMetrics) Entered(string)      {}
func (nopMetrics) Positioned(string)   {}
func (nopMetrics) ChallengeIssued()    {}
func (nopMetrics) PositionRead(string) {}

// The outcomes that are no standing's state.
const (
	outcomeRateLimited = "rate_limited"
	outcomeUnavailable = "unavailable"
)

// stateOutcomes are the standings' states as outcomes (lower case),
// spelled once rather than on every request.
var stateOutcomes = func() map[queue.UserState]string {
	m := map[queue.UserState]string{}
	for _, s := range []queue.UserState{queue.Waiting, queue.PreQueue, queue.Bypass, queue.Admitted,
		queue.Expired, queue.Ordered, queue.NotInQueue, queue.Abandoned} {
		m[s] = strings.ToLower(string(s))
	}
	return m
}()

// PositionOutcomes are the outcomes a position request can come to
// (Metrics.Positioned), for series made up front.
func PositionOutcomes() []string {
	out := []string{"full", "closed", "not_found", outcomeUnavailable, "invalid", "ticket_invalid", "error"}
	for _, o := range stateOutcomes {
		out = append(out, o)
	}
	return out
}

// PositionSources are where a position answer can come from
// (Metrics.PositionRead).
func PositionSources() []string { return []string{readFrontier, readStore} }

// outcome names what an enter or position request came to.
func outcome(st queue.Standing, err error) string {
	switch {
	case err == nil:
		if o, ok := stateOutcomes[st.State]; ok {
			return o
		}
		return strings.ToLower(string(st.State))
	case errors.Is(err, queue.ErrFull):
		return "full"
	case errors.Is(err, queue.ErrClosed):
		return "closed"
	case errors.Is(err, queue.ErrNotFound):
		return "not_found"
	case errors.Is(err, queue.ErrUnavailable):
		return outcomeUnavailable
	case errors.Is(err, queue.ErrChallengeRequired):
		return "challenge_required"
	case errors.Is(err, queue.ErrChallengeFailed):
		return "challenge_failed"
	case errors.Is(err, ErrInvalidQueueID), errors.Is(err, ErrInvalidUserID):
		return "invalid"
	case errors.Is(err, ErrTicketInvalid):
		return "ticket_invalid"
	}
	return "error"
}
