package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Retry runs op until it succeeds, ctx ends, op fails with an error that
// retryable rejects, or within has passed (0: no bound), so a pod that
// starts before its database or broker does not need a restart storm to
// recover. The pause doubles from 200 ms to 5 s; each failure is logged at
// warn with what. A nil retryable retries every error.
func Retry(ctx context.Context, log *slog.Logger, what string, within time.Duration, retryable func(error) bool, op func(context.Context) error) error {
	var deadline time.Time
	if within > 0 {
		deadline = time.Now().Add(within)
	}
	pause := retryMin
	for {
		err := op(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case retryable != nil && !retryable(err), !deadline.IsZero() && time.Now().After(deadline):
			return fmt.Errorf("%s: %w", what, err)
		}
		log.Warn(what+" failed; retrying", "err", err, "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, retryMax)
	}
}

// The pauses of Retry.
var retryMin, retryMax = 200 * time.Millisecond, 5 * time.Second
