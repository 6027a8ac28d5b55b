package redisstore

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// preQueuePage is how many pre-queued ids one read returns.
const preQueuePage = 10_000

// StartDraw begins or resumes the draw of queue q's closed pre-queue for
// the leader at epoch: it writes QueueStarted to the outbox (once), and
// returns the draw with the seed and the people still to place (in no
// particular order). It returns a zero DrawWork with State other than
// DrawDrawing when there is nothing to draw.
func (s *Store) StartDraw(ctx context.Context, q string, epoch int64) (queue.DrawWork, error) {
	w, err := s.drawStep(ctx, q, epoch, "announce", nil)
	if err != nil || w.State != queue.DrawDrawing {
		return w, err
	}
	k := KeysFor(q)
	for start := int64(0); ; start += preQueuePage {
		page, err := s.rdb.ZRange(ctx, k.PreQueue(), start, start+preQueuePage-1).Result()
		if err != nil {
			return w, classifyf("draw "+q+": read pre-queue", err)
		}
		w.Remaining = append(w.Remaining, page...)
		if len(page) < preQueuePage {
			return w, nil
		}
	}
}

// PlaceDrawn gives users, in the order given (the drawn order), the next
// places reserved for q's pre-queue; users placed already or gone are
// skipped, so a repeat changes nothing. It returns the draw as it stands.
func (s *Store) PlaceDrawn(ctx context.Context, q string, epoch int64, users []string) (queue.DrawWork, error) {
	return s.drawStep(ctx, q, epoch, "place", users)
}

// FinishDraw ends q's draw once nobody is left pre-queued (State
// DrawDrawn, QueueDrawn with the seed in the outbox); while someone is,
// it changes nothing and the returned State stays DrawDrawing.
func (s *Store) FinishDraw(ctx context.Context, q string, epoch int64) (queue.DrawWork, error) {
	return s.drawStep(ctx, q, epoch, "finish", nil)
}

func (s *Store) drawStep(ctx context.Context, q string, epoch int64, step string, users []string) (queue.DrawWork, error) {
	args := make([]any, 0, 3+len(users))
	args = append(args, epoch, step, q)
	for _, u := range users {
		args = append(args, u)
	}
	res, err := drawScript.Run(ctx, s.rdb, KeysFor(q).drawKeys(), args...).Slice()
	if err != nil {
		return queue.DrawWork{}, fmt.Errorf("draw %s (%s): %w", q, step, classify(err))
	}
	switch str(res[0]) {
	case "STALE":
		return queue.DrawWork{}, fmt.Errorf("draw %s at epoch %d: %w", q, epoch, queue.ErrStaleEpoch)
	case "NOT_FOUND":
		return queue.DrawWork{}, nil
	case "OK":
		if len(res) < 5 {
			return queue.DrawWork{}, fmt.Errorf("draw %s: short reply %v", q, res)
		}
		return queue.DrawWork{
			State: queue.DrawState(str(res[1])), Seed: str(res[2]),
			PreQueued: intOf(res, 3), Placed: intOf(res, 4),
		}, nil
	}
	return queue.DrawWork{}, fmt.Errorf("draw %s: unknown reply %v", q, res)
}
