package app

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Configure creates queue q with the defaults overlaid by patch, or changes
// the given knobs of an existing queue. The merged configuration is checked as
// a whole (some limits depend on other knobs); nothing is written when any
// field is bad. It reports whether the queue was created.
func (s *Service) Configure(ctx context.Context, q string, patch queue.Patch) (queue.Config, bool, error) {
	return s.ConfigureIf(ctx, q, patch, Precondition{}, queue.Change{})
}

// Precondition is what an admin write expects of the queue it changes
// (HTTP's If-Match and If-None-Match): checked against the stored knobs
// in the same transaction as the write, so two operators cannot
// overwrite each other's change unseen.
type Precondition struct {
	// IfMatch lists the ETags (queue.Config.ETag) the change is for; "*"
	// is any version of an existing queue. Empty: no condition.
	IfMatch []string
	// IfNoneMatch (If-None-Match: *) creates only: the queue must not
	// exist.
	IfNoneMatch bool
}

// ErrPreconditionFailed: the queue is not the version the change was for
// (or exists, for a create-only write). Nothing was written.
var ErrPreconditionFailed = errors.New("the queue has changed since the version this change was made for")

// holds reports whether a queue with the knobs cur (exists: it is there)
// is what p expects.
func (p Precondition) holds(cur queue.Config, exists bool) bool {
	if p.IfNoneMatch && exists {
		return false
	}
	if len(p.IfMatch) == 0 {
		return true
	}
	if !exists {
		return false
	}
	tag := cur.ETag()
	for _, m := range p.IfMatch {
		if m == "*" || m == tag {
			return true
		}
	}
	return false
}

// ConfigureIf is Configure under a precondition, on an operator's behalf:
// ErrPreconditionFailed, and nothing written, when the queue is not what
// pre expects; a change written carries its QueueChanged event naming by.
// A refusal is recorded by the caller, which knows the answer it gives
// (RefusedChange).
func (s *Service) ConfigureIf(ctx context.Context, q string, patch queue.Patch, pre Precondition, by queue.Change) (queue.Config, bool, error) {
	if !queue.ValidID(q) {
		return queue.Config{}, false, ErrInvalidQueueID
	}
	cfg, created, err := s.queues.UpdateConfigBy(ctx, q, by, func(cur queue.Config, exists bool) (queue.Config, error) {
		if !pre.holds(cur, exists) {
			return cur, ErrPreconditionFailed
		}
		next := patch.Apply(cur)
		errs := next.Validate()
		if t := next.StartsAt; !t.IsZero() && !t.Equal(cur.StartsAt) {
			// Only a new start time is checked against the clock: a PUT
			// that repeats the current one after the start still passes.
			if now := time.Now(); t.Before(now) {
				errs = append(errs, queue.FieldError{Field: "startsAt", Message: "must be in the future (remove it, with null, to start now)"})
			} else if t.After(now.Add(queue.MaxStartsAhead)) {
				errs = append(errs, queue.FieldError{Field: "startsAt", Message: "must be at most a year ahead"})
			}
		}
		if len(errs) > 0 {
			return cur, &InvalidConfigError{Fields: errs}
		}
		return next, nil
	})
	return cfg, created, err
}

// RefusedChange records an operator's refused change of q (reason: the
// problem type answered) in its audit trail, when q exists. A refusal
// changed nothing, so failing to record it is logged, not answered.
func (s *Service) RefusedChange(ctx context.Context, q string, by queue.Change, reason string) {
	if !queue.ValidID(q) {
		return
	}
	recorded, err := s.queues.RefuseChange(ctx, q, by, reason)
	switch {
	case err != nil:
		slog.WarnContext(ctx, "a refused queue change was not recorded in the audit trail", "queue", q, "actor", by.Actor,
			"address", by.Address, "reason", reason, "err", err)
	case !recorded:
		// No queue to file it under: the log is its only record.
		slog.InfoContext(ctx, "refused a change of a queue that does not exist", "queue", q, "actor", by.Actor,
			"address", by.Address, "reason", reason)
	}
}

// Queue returns q's knobs and live figures.
func (s *Service) Queue(ctx context.Context, q string) (queue.Config, queue.Stats, error) {
	if !queue.ValidID(q) {
		return queue.Config{}, queue.Stats{}, ErrInvalidQueueID
	}
	return s.queues.Config(ctx, q)
}

// Close stops entries to q and drops its line; it returns how many people
// were waiting. The queue's keys go once its last token is used or expired
// (the dispatcher removes it). An id listed in wr:queues without any
// configuration (a leftover) is removed at once. The close of a queue
// carries its QueueChanged (action CLOSED) naming by.
func (s *Service) Close(ctx context.Context, q string, by queue.Change) (int64, error) {
	if !queue.ValidID(q) {
		return 0, ErrInvalidQueueID
	}
	n, err := s.queues.CloseBy(ctx, q, by)
	if errors.Is(err, queue.ErrNotFound) {
		removed, uerr := s.queues.Unregister(ctx, q)
		if uerr != nil {
			return 0, uerr
		}
		if removed {
			return 0, nil
		}
	}
	return n, err
}

// Queues lists the known queue ids, sorted.
func (s *Service) Queues(ctx context.Context) ([]string, error) {
	ids, err := s.queues.Queues(ctx)
	if err != nil {
		return nil, err
	}
	sort.Strings(ids)
	return ids, nil
}

// Lengths reads how many wait in line in each known queue, for the first
// limit queues by id: what the queue length gauge shows at a scrape, read
// through the same store as every request.
func (s *Service) Lengths(ctx context.Context, limit int) (map[string]int64, error) {
	ids, err := s.Queues(ctx)
	if err != nil {
		return nil, err
	}
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return s.queues.Waiting(ctx, ids)
}
