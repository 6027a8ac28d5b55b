package app

import (
	"context"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Enter gives user a place in line q, returns their token if they hold one,
// or fails with queue.ErrNotFound, queue.ErrClosed or queue.ErrFull.
func (s *Service) Enter(ctx context.Context, q, user string) (queue.Standing, error) {
	if err := checkIDs(q, user); err != nil {
		return queue.Standing{}, err
	}
	return s.store.Enter(ctx, q, user)
}

// Position tells user where they stand in q.
func (s *Service) Position(ctx context.Context, q, user string) (queue.Standing, error) {
	if err := checkIDs(q, user); err != nil {
		return queue.Standing{}, err
	}
	return s.store.Position(ctx, q, user)
}

// Leave takes user out of line q. Leaving twice is not an error.
func (s *Service) Leave(ctx context.Context, q, user string) error {
	if err := checkIDs(q, user); err != nil {
		return err
	}
	_, err := s.store.Leave(ctx, q, user)
	return err
}
