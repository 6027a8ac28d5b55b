package order

import (
	"context"
	"errors"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// ReapResult counts what one reaper pass did.
type ReapResult struct {
	Settled, Abandoned int
}

// Reap looks at every consumed token whose inflight lease has passed: an
// order with that token id exists -> settle (the process died after commit);
// none -> OrderFailed(ABANDONED, restorable) so the token comes back (it
// died, or the client vanished, before commit). A transaction still open
// as the reaper looks cannot commit after it: the OrderFailed takes the
// attempt (Event.Attempt), so the late commit fails, or, if the commit
// wins, the OrderFailed is refused and the order is settled. Idempotent and safe with
// several replicas: settle is idempotent, and the event id is the same one
// the handler would have used, so a failure is recorded once.
//
// Only the queues with products in this service's database are reaped. A
// token of another queue was consumed by an order-service with another
// database, and "no order here" would wrongly declare it abandoned: its
// owner may have committed the order, and restoring the token would let the
// buyer order twice.
func (s *Service) Reap(ctx context.Context) (ReapResult, error) {
	var res ReapResult
	qs, err := s.repo.QueueIDs(ctx)
	if err != nil {
		return res, err
	}
	for _, q := range qs {
		if !queue.ValidID(q) {
			continue
		}
		overdue, err := s.tokens.Overdue(ctx, q, 200)
		if err != nil {
			return res, err
		}
		for _, t := range overdue {
			if err := s.reap(ctx, q, t, &res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func (s *Service) reap(ctx context.Context, q string, t queue.InflightToken, res *ReapResult) error {
	o, found, err := s.repo.OrderByToken(ctx, t.TokenID)
	if err != nil {
		return err
	}
	if found {
		if _, err := s.tokens.Settle(ctx, q, o.UserID, t.TokenID, o.ID); err != nil {
			return err
		}
		res.Settled++
		s.log.Info("reaper settled a committed order", "queue", q, "order", o.ID, "token", t.TokenID)
		return nil
	}
	if t.OrderID == "" {
		// No data to restore from (it expired with the token): drop the
		// lease entry so it is not retried forever.
		return s.tokens.HandOff(ctx, q, t.UserID, t.TokenID)
	}
	ev := failed(q, t.UserID, t.TokenID, t.OrderID, ReasonAbandoned, true, t.ExpiresAt)
	if _, err := s.repo.AddEvent(ctx, ev); errors.Is(err, ErrOrderPlaced) {
		// Its transaction committed between the look-up and now (the
		// outbox holds one resolution per attempt): settle it.
		if _, err := s.tokens.Settle(ctx, q, t.UserID, t.TokenID, t.OrderID); err != nil {
			return err
		}
		res.Settled++
		s.log.Info("reaper settled an order that committed as it looked", "queue", q, "order", t.OrderID, "token", t.TokenID)
		return nil
	} else if err != nil {
		return err
	}
	if err := s.tokens.HandOff(ctx, q, t.UserID, t.TokenID); err != nil {
		return err
	}
	res.Abandoned++
	s.log.Info("reaper recorded an abandoned order attempt", "queue", q, "order", t.OrderID, "token", t.TokenID)
	return nil
}
