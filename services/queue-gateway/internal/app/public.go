package app

import (
	"context"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// publicTTL is how old the public view may be: it already says
// Cache-Control max-age=1, and its figures (waiting, rate) are a hint.
const publicTTL = time.Second

// publicForgetAt: past this many cached queues, the stale ones are dropped
// when the next is stored.
const publicForgetAt = 1024

// publicView is what the public view of a queue is answered from: at most
// one Redis read per queue a second in this replica, however many
// addresses ask. A queue that does not exist is not remembered (it is read
// each time, concurrent reads of one id sharing one call), so a queue
// created a moment ago is found at once.
type publicView struct {
	cfg queue.Config
	st  queue.Stats
}

// PublicQueue is q's configuration and figures for the public view, at
// most publicTTL old.
func (s *Service) PublicQueue(ctx context.Context, q string) (queue.Config, queue.Stats, error) {
	if !queue.ValidID(q) {
		return queue.Config{}, queue.Stats{}, ErrInvalidQueueID
	}
	v, err := s.public.get(q, func() (publicView, error) {
		cfg, st, err := s.queues.Config(context.WithoutCancel(ctx), q)
		return publicView{cfg: cfg, st: st}, err
	})
	return v.cfg, v.st, err
}
