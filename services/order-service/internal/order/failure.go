package order

import (
	"context"
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// failureOf classifies an order failure for OrderFailed.
func failureOf(err error) (FailureReason, bool) {
	switch {
	case errors.Is(err, ErrSoldOut):
		return ReasonSoldOut, false
	case errors.Is(err, ErrOrderLimitReached):
		return ReasonOrderLimit, false
	case errors.Is(err, ErrDuplicateToken):
		// An order exists for this token: it is spent.
		return ReasonInvalidRequest, false
	case errors.Is(err, ErrProductNotFound):
		return ReasonInvalidRequest, true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, queue.ErrNotReplicated):
		// A consume the Redis replicas did not confirm in time counts
		// as a timeout: the order was never attempted.
		return ReasonTimeout, true
	}
	return ReasonDatabaseError, true
}

// failed records a failed attempt whose token was consumed: OrderFailed
// goes into the outbox, then the token is handed off to restoration. It
// reports placed when the outbox refused the event because the attempt's
// order committed after all (its COMMIT landed and the answer was lost or
// late: a timeout, a dropped connection): the caller settles it, and the
// token must not come back.
//
// Only a failure known to have stored nothing (definite) may go straight
// to the broker when the outbox cannot be written. After any other error
// the order may have committed, and an OrderFailed nobody checked against
// the outbox could give the token back for it, so it waits: the inflight
// lease stays and the reaper records it once the database answers (as
// ABANDONED). The token comes back either way.
func (s *Service) failed(ctx context.Context, q, user, tokenID, orderID string, expires time.Time, cause error) (placed bool) {
	reason, restorable := failureOf(cause)
	ev := failed(q, user, tokenID, orderID, reason, restorable, expires)
	// The request may be gone; recording the failure must not be.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return s.record(ctx, ev, cause, definite(cause))
}

// definite reports whether an attempt that failed with err is known to
// have stored nothing: its transaction refused it (stock, limit, token,
// product), the database answered with an error or was never reached
// (ErrNothingStored), or the attempt never got to the database (a consume
// the Redis replicas did not confirm). A timeout or a lost connection is
// not: the COMMIT may have landed.
func definite(err error) bool {
	for _, d := range []error{ErrSoldOut, ErrOrderLimitReached, ErrDuplicateToken, ErrProductNotFound, ErrAttemptFailed,
		ErrNothingStored, queue.ErrNotReplicated} {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

func (s *Service) record(ctx context.Context, ev Failed, cause error, direct bool) (placed bool) {
	log := s.log.With("queue", ev.QueueID, "token", ev.TokenID, "event", ev.EventID(), "cause", cause)
	_, err := s.repo.AddEvent(ctx, ev)
	if errors.Is(err, ErrOrderPlaced) {
		log.WarnContext(ctx, "the order committed though its transaction reported an error; settling it")
		return true
	}
	if err != nil && direct && s.direct != nil {
		log.WarnContext(ctx, "outbox unavailable: publishing OrderFailed directly", "err", err)
		err = s.direct.PublishEvent(ctx, ev)
	}
	if err != nil {
		log.ErrorContext(ctx, "could not record OrderFailed now; the reaper will", "err", err)
		return false
	}
	if err := s.tokens.HandOff(ctx, ev.QueueID, ev.UserID, ev.TokenID); err != nil {
		// Harmless: the reaper finds the event already recorded.
		log.WarnContext(ctx, "hand off to restoration", "err", err)
	}
	log.InfoContext(ctx, "order failed", "restorable", ev.Restorable)
	return false
}
