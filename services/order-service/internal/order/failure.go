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

// failed records a failed attempt whose token was consumed: OrderFailed goes
// into the outbox, or, when the database is what failed, straight to the
// broker; then the token is handed off to restoration. If neither can be
// recorded now, the inflight lease stays and the reaper records it later
// (as ABANDONED): the token comes back either way.
func (s *Service) failed(ctx context.Context, q, user, tokenID, orderID string, expires time.Time, cause error) {
	reason, restorable := failureOf(cause)
	ev := failed(q, user, tokenID, orderID, reason, restorable, expires)
	// The request may be gone; recording the failure must not be.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.record(ctx, ev, cause)
}

func (s *Service) record(ctx context.Context, ev Failed, cause error) {
	log := s.log.With("queue", ev.QueueID, "token", ev.TokenID, "event", ev.EventID(), "cause", cause)
	_, err := s.repo.AddEvent(ctx, ev)
	if err != nil && s.direct != nil {
		log.WarnContext(ctx, "outbox unavailable: publishing OrderFailed directly", "err", err)
		err = s.direct.PublishEvent(ctx, ev)
	}
	if err != nil {
		log.ErrorContext(ctx, "could not record OrderFailed now; the reaper will", "err", err)
		return
	}
	if err := s.tokens.HandOff(ctx, ev.QueueID, ev.UserID, ev.TokenID); err != nil {
		// Harmless: the reaper finds the event already recorded.
		log.WarnContext(ctx, "hand off to restoration", "err", err)
	}
	log.InfoContext(ctx, "order failed", "restorable", ev.Restorable)
}
