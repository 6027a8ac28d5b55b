package redisstore

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// PositionMany reads where each of users stands in queue q, in one pipelined
// round trip: the notification-service's per-tick read for every connected
// user of a queue. Replies map by user; a user whose read failed is absent.
func (s *Store) PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error) {
	if len(users) == 0 {
		return map[string]queue.Standing{}, nil
	}
	shards, key, tags, err := s.route(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("position many %s: %w", q, err)
	}
	lines := make([]int, len(users))
	for i, u := range users {
		lines[i] = queue.LineOf(key, u, shards)
	}
	cmds, err := s.evalAll(ctx, positionScript, len(users),
		func(i int) []string { return KeysFor(lineKeyID(q, lines[i], tags)).positionKeys(users[i]) },
		func(i int) []any { return []any{users[i], "", shards} })
	out := make(map[string]queue.Standing, len(users))
	for i, c := range cmds {
		res, cerr := c.Slice()
		if cerr != nil {
			continue
		}
		if stale, _ := s.reshard(q, res); stale {
			continue // routed by a stale count: the next round reads it right
		}
		st, _, serr := standingReply(q, res)
		if serr != nil {
			continue
		}
		if st, serr = s.toQueue(ctx, q, shards, lines[i], st); serr == nil {
			out[users[i]] = st
		}
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("position many %s: %w", q, classify(err))
	}
	return out, nil
}
