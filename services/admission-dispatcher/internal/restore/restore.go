// Package restore gives tokens back when orders fail: for each failed order
// (an OrderFailed the dispatcher's wiring decodes from its quorum queue) it
// restores the token (restorable) or frees the slot (not restorable).
package restore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Store restores tokens. redisstore.Store implements it.
type Store interface {
	Restore(ctx context.Context, q, user, tokenID, orderID string, restorable bool) (queue.RestoreOutcome, error)
}

// Metrics observes the handled failures; wire implements it with
// Prometheus series. It is called from the consumer's goroutines and must
// not block.
type Metrics interface {
	// Restored: a failure of q was handled, to outcome o.
	Restored(q string, o queue.RestoreOutcome)
}

// nopMetrics records nothing: the Handler's Metrics when given none.
type nopMetrics struct{}

func (nopMetrics) Restored(string, queue.RestoreOutcome) {}

// Failure is one failed order, as an OrderFailed event tells it.
type Failure struct {
	QueueID, UserID, TokenID, OrderID string
	// Reason is why the order failed (for the log).
	Reason string
	// Restorable: the token goes back (a passing failure); otherwise the
	// slot is freed (sold out, payment declined).
	Restorable bool
	// Redelivery is how often the event was delivered before (for the log).
	Redelivery int64
}

// Result is what becomes of a failure's delivery.
type Result int

// The results of Handle.
const (
	// Done: handled, or nothing left to do; acknowledge it.
	Done Result = iota
	// Retry: a passing failure (the store); deliver it again.
	Retry
	// Poison: it can never be handled; dead-letter it.
	Poison
)

// Handler restores the tokens of failed orders.
type Handler struct {
	store Store
	m     Metrics
	log   *slog.Logger
	// unavailableFor is how long a failure is held, retrying, while Redis
	// is down, before it goes back to the queue: an outage should delay
	// restores, not burn through the delivery limit into the DLQ.
	unavailableFor time.Duration
}

// NewHandler returns a Handler; a nil m records nothing.
func NewHandler(store Store, m Metrics, log *slog.Logger) *Handler {
	if m == nil {
		m = nopMetrics{}
	}
	return &Handler{store: store, m: m, log: log, unavailableFor: 30 * time.Second}
}

// Handle restores the token of one failed order. Redelivery is normal: the
// restore is idempotent by token and order id.
func (h *Handler) Handle(ctx context.Context, f Failure) Result {
	if !queue.ValidID(f.QueueID) || !queue.ValidUserID(f.UserID) || f.TokenID == "" || f.OrderID == "" {
		h.log.ErrorContext(ctx, "OrderFailed without valid queue, user, token and order ids: dead-lettered", "token", f.TokenID, "order", f.OrderID)
		return Poison
	}
	deadline := time.Now().Add(h.unavailableFor)
	pause := 100 * time.Millisecond
	for {
		out, err := h.store.Restore(ctx, f.QueueID, f.UserID, f.TokenID, f.OrderID, f.Restorable)
		if err == nil {
			h.m.Restored(f.QueueID, out)
			h.log.InfoContext(ctx, "order failure handled", "queue", f.QueueID, "token", f.TokenID, "order", f.OrderID,
				"reason", f.Reason, "restorable", f.Restorable, "outcome", out, "redelivery", f.Redelivery)
			return Done
		}
		if !errors.Is(err, queue.ErrUnavailable) || time.Now().After(deadline) {
			h.log.WarnContext(ctx, "restore failed: will be redelivered", "token", f.TokenID, "err", err)
			return Retry
		}
		select {
		case <-ctx.Done():
			return Retry
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}
