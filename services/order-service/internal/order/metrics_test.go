package order

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Each error an order request can end in is counted under the outcome of
// the answer the HTTP port gives it (its problem table), so the
// waitingroom_orders_requests_total series keep their meaning.
func TestRequestOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "created"},
		{ErrSoldOut, "sold_out"},
		{fmt.Errorf("place: %w", ErrSoldOut), "sold_out"},
		{fmt.Errorf("place: %w", ErrOrderLimitReached), "order_limit"},
		{ErrDuplicateToken, "conflict"},
		{ErrIdempotencyInProgress, "conflict"},
		{queue.ErrInvalidToken, "invalid_token"},
		{ErrTokenSpent, "invalid_token"},
		{&queue.NotActiveError{Wait: time.Second}, "not_active"},
		{&RateLimitedError{RetryAfter: time.Second}, "rate_limited"},
		{&RateLimitedError{PerUser: true}, "rate_limited"},
		{ErrInvalidRequest, "invalid"},
		{ErrProductNotFound, "invalid"},
		{ErrUnavailable, "unavailable"},
		{fmt.Errorf("consume: %w", queue.ErrUnavailable), "unavailable"},
		{context.DeadlineExceeded, "unavailable"},
		{context.Canceled, "error"},
		{ErrOrderNotFound, "error"},
		{errors.New("boom"), "error"},
	} {
		if got := requestOutcome(tc.err); got != tc.want {
			t.Errorf("requestOutcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
