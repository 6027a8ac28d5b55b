package app

import (
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Configs are the queue configurations the gateway keeps in memory, so it
// knows a queue's fail mode while Redis cannot be reached.
// redisstore.ConfigCache implements it.
type Configs interface {
	Get(q string) (queue.Config, bool)
}

// bypass answers a request on q that the store could not serve: when Redis
// did not answer and q is known to fail OPEN, the BYPASS standing (go
// straight to the order form) instead of the error. Everything else, a
// CLOSED or unknown queue above all, keeps its error: the 503.
//
// A queue that fails OPEN still refuses unless queue.Config.Bypasses: a
// PAUSED one lets nobody through, one whose start time is ahead has not
// begun selling (nobody skips its pre-queue), and a CLOSED one takes no
// new entrant (enter says so: 409).
func (s *Service) bypass(q string, entering bool, st queue.Standing, err error) (queue.Standing, error) {
	cfg, ok := s.failsOpen(q, err)
	if !ok {
		return st, err
	}
	if entering && cfg.State == queue.Closed {
		return queue.Standing{}, queue.ErrClosed
	}
	if !cfg.Bypasses(time.Now()) {
		return st, err
	}
	return queue.BypassStanding(q, cfg), nil
}

// failsOpen reports whether err means Redis did not answer and q, as last
// read, fails OPEN; it returns q's configuration when so.
func (s *Service) failsOpen(q string, err error) (queue.Config, bool) {
	if s.configs == nil || !errors.Is(err, queue.ErrUnavailable) {
		return queue.Config{}, false
	}
	cfg, ok := s.configs.Get(q)
	return cfg, ok && cfg.FailMode == queue.FailOpen
}
