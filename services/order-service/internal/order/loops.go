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
// time, marked sent only after the broker confirmed them. m (nil: none) is
// told the unsent count after each round.
func RelayLoop(ctx context.Context, repo RelayRepo, pub BatchPublisher, log *slog.Logger, m Metrics) {
	m = orNop(m)
	pause := time.Duration(0)
	for ctx.Err() == nil {
		n, err := repo.RelayBatch(ctx, 200, pub.PublishEvents)
		if b, berr := repo.OutboxBacklog(ctx); berr == nil {
			m.Backlog(b)
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

// ReapLoop runs Reap every interval until ctx ends; Metrics is told what
// each pass did.
func (s *Service) ReapLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		res, err := s.Reap(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("reaper pass", "err", err)
		}
		s.m.Reaped(res)
	}
}

// Pruned counts the rows one retention pass deleted.
type Pruned struct{ Outbox, Idempotency int64 }

// PruneRepo deletes what is past retention. pg.DB implements it.
type PruneRepo interface {
	Prune(ctx context.Context, sentBefore, keysBefore time.Time, batch int) (Pruned, error)
}

// Retention is how long the order database keeps what only serves a while:
// published outbox events (for inspection and replays) and Idempotency-Key
// outcomes (for client retries). Zero keeps a table's rows forever.
type Retention struct {
	Outbox, IdempotencyKeys time.Duration
	// Every is the pause between passes; Batch bounds one DELETE.
	Every time.Duration
	Batch int
}

// PruneLoop deletes what is past retention once at start and then every
// r.Every until ctx ends. Without it the outbox gains a row per order and
// per failure forever. m (nil: none) is told each pass's counts.
func PruneLoop(ctx context.Context, repo PruneRepo, r Retention, log *slog.Logger, m Metrics) {
	if (r.Outbox <= 0 && r.IdempotencyKeys <= 0) || r.Every <= 0 {
		return
	}
	m = orNop(m)
	// A zero retention becomes a cut-off before any row: nothing deleted.
	cutoff := func(now time.Time, keep time.Duration) time.Time {
		if keep <= 0 {
			return time.Time{}
		}
		return now.Add(-keep)
	}
	t := time.NewTicker(r.Every)
	defer t.Stop()
	for {
		now := time.Now()
		p, err := repo.Prune(ctx, cutoff(now, r.Outbox), cutoff(now, r.IdempotencyKeys), r.Batch)
		if err != nil && ctx.Err() == nil {
			log.Warn("retention pass", "err", err)
		}
		if p.Outbox+p.Idempotency > 0 {
			log.Info("retention pass deleted old rows", "outbox", p.Outbox, "idempotency_keys", p.Idempotency)
		}
		m.Pruned(p)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
