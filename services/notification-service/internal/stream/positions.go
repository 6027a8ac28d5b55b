package stream

import (
	"context"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// RunPositions sends every connected user a position event each period, read
// from the store in one round per queue. It is also the safety net for
// admissions: a user the read finds admitted whose token was not announced
// on a stream (an event missed while this replica reconnected to the broker)
// is announced now.
func (s *Service) RunPositions(ctx context.Context) {
	t := time.NewTicker(s.o.PositionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.round(ctx)
	}
}

// round is one period of RunPositions, over every queue with a stream open.
func (s *Service) round(ctx context.Context) {
	open := s.hub.Users()
	s.places.keepOnly(open)
	for q, users := range open {
		s.positions(ctx, q, users)
	}
}

// positions sends users of q their position: from the admission frontier
// for those whose ticket's place is far from the front, from one pipelined
// store read for the rest.
func (s *Service) positions(ctx context.Context, q string, users []string) {
	sts := make(map[string]queue.Standing, len(users))
	var ask []string
	for _, u := range users {
		if st, ok := s.fromFrontier(q, u); ok {
			sts[u] = st
		} else {
			ask = append(ask, u)
		}
	}
	if len(ask) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		read, err := s.pos.PositionMany(rctx, q, ask)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("position round", "queue", q, "users", len(ask), "err", err)
			}
		}
		for u, st := range read {
			sts[u] = st
		}
	}
	at := time.Now()
	for user, st := range sts {
		if s.sightings != nil && (st.State == queue.Waiting || st.State == queue.PreQueue) {
			s.sightings.Saw(q, user)
		}
		if st.State == queue.Admitted && st.Token != nil {
			s.Admitted(q, user, st.Token.ID, st.Token.ActivateAt, st.Token.ExpiresAt, at)
		}
		m := positionMessage(st, at)
		for _, hs := range s.hub.Streams(q, user) {
			s.offer(hs, m)
		}
	}
}
