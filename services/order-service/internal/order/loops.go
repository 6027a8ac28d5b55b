package order

import (
	"context"
	"log/slog"
	"time"
)

// RelayRepo is the outbox side of the database. pg.DB implements it.
type RelayRepo interface {
	RelayBatch(ctx context.Context, limit int, publish func(context.Context, []OutboxEvent) error) (int, error)
	OutboxBacklog(ctx context.Context) (int64, error)
}

// BatchPublisher publishes outbox events and returns once the broker
// confirmed them all.
type BatchPublisher interface {
	PublishEvents(ctx context.Context, events []OutboxEvent) error
}

// RelayLoop moves the outbox to the broker until ctx ends: batches locked
// with FOR UPDATE SKIP LOCKED, so replicas never publish one row at the same
// time, marked sent only after the broker confirmed them. backlog, if not
// nil, receives the unsent count after each round.
func RelayLoop(ctx context.Context, repo RelayRepo, pub BatchPublisher, log *slog.Logger, backlog func(int64)) {
	pause := time.Duration(0)
	for ctx.Err() == nil {
		n, err := repo.RelayBatch(ctx, 200, pub.PublishEvents)
		if backlog != nil {
			if b, berr := repo.OutboxBacklog(ctx); berr == nil {
				backlog(b)
			}
		}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				log.Warn("outbox relay", "err", err)
			}
			pause = min(max(2*pause, 100*time.Millisecond), 5*time.Second)
		case n == 0:
			pause = 50 * time.Millisecond // idle: poll gently
		default:
			pause = 0
		}
		if pause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// ReapLoop runs Reap every interval until ctx ends.
func (s *Service) ReapLoop(ctx context.Context, every time.Duration, observe func(ReapResult)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := s.Reap(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			s.log.Warn("reaper pass", "err", err)
		}
		if observe != nil {
			observe(res)
		}
	}
}
