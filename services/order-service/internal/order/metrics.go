package order

import (
	"context"
	"errors"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Metrics observes what the order-service does that no port call shows;
// wire implements it with Prometheus series (the calls on Tokens and Repo
// are measured by wire's decorators of those ports). Its methods are
// called from many goroutines at once and must not block.
type Metrics interface {
	// Requested: an order request came to outcome: created, bypassed (an
	// order created without an entry token, Redis being unreachable),
	// sold_out, order_limit, conflict, invalid_token, not_active,
	// rate_limited, invalid, unavailable, replayed or error.
	Requested(outcome string)
	// Reaped: what one reaper pass did.
	Reaped(ReapResult)
	// Pruned: what one retention pass deleted.
	Pruned(Pruned)
	// Backlog: n outbox events are not yet confirmed by the broker.
	Backlog(n int64)
	// HealthReports: n health reports were published, or dropped.
	HealthReports(n int, published bool)
}

// nopMetrics records nothing: the Metrics when given none.
type nopMetrics struct{}

func (nopMetrics) Requested(string)  {}
func (nopMetrics) Reaped(ReapResult) {}
func (nopMetrics) Pruned(Pruned)     {}
func (nopMetrics) Backlog(int64)     {}

func (nopMetrics) HealthReports(int, bool) {}

func orNop(m Metrics) Metrics {
	if m == nil {
		return nopMetrics{}
	}
	return m
}

// Outcomes of order requests named outside requestOutcome.
const (
	outcomeReplayed    = "replayed"
	outcomeBypassed    = "bypassed"
	outcomeInvalid     = "invalid"
	outcomeUnavailable = "unavailable"
)

// requestOutcome names what an order request came to. It sorts the errors
// as the HTTP port's problem table does (first match first), so each
// outcome is one kind of answer.
func requestOutcome(err error) string {
	var limited *RateLimitedError
	var early *queue.NotActiveError
	switch {
	case err == nil:
		return "created"
	case errors.As(err, &limited):
		return "rate_limited"
	case errors.Is(err, queue.ErrInvalidToken):
		return "invalid_token"
	case errors.As(err, &early):
		return "not_active"
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrProductNotFound):
		return outcomeInvalid
	case errors.Is(err, ErrSoldOut):
		return "sold_out"
	case errors.Is(err, ErrOrderLimitReached):
		return "order_limit"
	case errors.Is(err, ErrDuplicateToken), errors.Is(err, ErrIdempotencyInProgress):
		return "conflict"
	case errors.Is(err, ErrUnavailable), errors.Is(err, queue.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return outcomeUnavailable
	}
	return "error"
}
