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
	for q, users := range s.hub.Users() {
		s.positions(ctx, q, users)
	}
}

func (s *Service) positions(ctx context.Context, q string, users []string) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	sts, err := s.pos.PositionMany(rctx, q, users)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("position round", "queue", q, "users", len(users), "err", err)
		}
		return
	}
	at := time.Now()
	for user, st := range sts {
		if st.State == queue.Admitted && st.Token != nil {
			s.Admitted(q, user, st.Token.ID, st.Token.ActivateAt, st.Token.ExpiresAt, at)
		}
		m := positionMessage(st, at)
		for _, hs := range s.hub.Streams(q, user) {
			s.offer(hs, m)
		}
	}
}
