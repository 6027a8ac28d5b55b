package app

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// publicTTL is how old the public view may be: it already says
// Cache-Control max-age=1, and its figures (waiting, rate) are a hint.
const publicTTL = time.Second

// publicForgetAt: past this many cached queues, the stale ones are dropped
// when the next is stored.
const publicForgetAt = 1024

// publicViews answers the public view of a queue from memory: at most one
// Redis read per queue a second in this replica, however many addresses
// ask. A queue that does not exist is not remembered (it is read each
// time, concurrent reads of one id sharing one call), so a queue created a
// moment ago is found at once.
type publicViews struct {
	now func() time.Time
	sf  singleflight.Group

	mu    sync.Mutex
	views map[string]publicView
}

type publicView struct {
	cfg queue.Config
	st  queue.Stats
	at  time.Time
}

func newPublicViews() *publicViews {
	return &publicViews{now: time.Now, views: map[string]publicView{}}
}

func (p *publicViews) fresh(q string) (publicView, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.views[q]
	return v, ok && p.now().Sub(v.at) < publicTTL
}

// PublicQueue is q's configuration and figures for the public view, at
// most publicTTL old.
func (s *Service) PublicQueue(ctx context.Context, q string) (queue.Config, queue.Stats, error) {
	if !queue.ValidID(q) {
		return queue.Config{}, queue.Stats{}, ErrInvalidQueueID
	}
	if v, ok := s.public.fresh(q); ok {
		return v.cfg, v.st, nil
	}
	got, err, _ := s.public.sf.Do(q, func() (any, error) {
		if v, ok := s.public.fresh(q); ok {
			return v, nil
		}
		cfg, st, err := s.queues.Config(context.WithoutCancel(ctx), q)
		if err != nil {
			return nil, err
		}
		v := publicView{cfg: cfg, st: st, at: s.public.now()}
		s.public.mu.Lock()
		if len(s.public.views) >= publicForgetAt {
			for k, old := range s.public.views {
				if v.at.Sub(old.at) >= publicTTL {
					delete(s.public.views, k)
				}
			}
		}
		s.public.views[q] = v
		s.public.mu.Unlock()
		return v, nil
	})
	if err != nil {
		return queue.Config{}, queue.Stats{}, err
	}
	v := got.(publicView)
	return v.cfg, v.st, nil
}
