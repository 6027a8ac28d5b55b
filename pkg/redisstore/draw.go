package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// preQueuePage is how many pre-queued ids one read returns.
const preQueuePage = 10_000

// StartDraw begins or resumes the draw of queue q's closed pre-queue for
// the leader at epoch: it writes QueueStarted to the outbox (once), and
// returns the draw with the seed and the people still to place (in no
// particular order). It returns a zero DrawWork with State other than
// DrawDrawing when there is nothing to draw.
//
// q may be a line id (queue.LineID): the line's pre-queue is drawn, with
// totals t for its events (see queue.DrawTotals).
func (s *Store) StartDraw(ctx context.Context, q string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error) {
	w, err := s.drawStep(ctx, q, epoch, "announce", totalsArgs(t))
	if err != nil || w.State != queue.DrawDrawing {
		return w, err
	}
	k, err := s.keysOf(ctx, q)
	if err != nil {
		return w, fmt.Errorf("draw %s: %w", q, err)
	}
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
func (s *Store) FinishDraw(ctx context.Context, q string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error) {
	return s.drawStep(ctx, q, epoch, "finish", totalsArgs(t))
}

// totalsArgs are announce's and finish's ARGV 4 to 6.
func totalsArgs(t queue.DrawTotals) []string {
	args := []string{"", "", ""}
	if t.Quiet {
		args[0] = "1"
	}
	if t.OthersPreQueued > 0 || t.OthersPlaced > 0 {
		args[1], args[2] = strconv.FormatInt(t.OthersPreQueued, 10), strconv.FormatInt(t.OthersPlaced, 10)
	}
	return args
}

func (s *Store) drawStep(ctx context.Context, q string, epoch int64, step string, users []string) (queue.DrawWork, error) {
	qid, _, ok := queue.ParseLineID(q)
	if !ok {
		return queue.DrawWork{}, fmt.Errorf("draw %s: %w", q, queue.ErrNotFound)
	}
	args := make([]any, 0, 3+len(users))
	args = append(args, epoch, step, qid)
	for _, u := range users {
		args = append(args, u)
	}
	k, err := s.keysOf(ctx, q)
	if err != nil {
		return queue.DrawWork{}, fmt.Errorf("draw %s (%s): %w", q, step, err)
	}
	res, err := drawScript.Run(ctx, s.rdb, k.drawKeys(), args...).Slice()
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
			PreQueued: intOf(res, 3), Placed: intOf(res, 4), Count: intOf(res, 5),
		}, nil
	}
	return queue.DrawWork{}, fmt.Errorf("draw %s: unknown reply %v", q, res)
}
