package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// PositionMany reads where each of users stands in queue q, in one pipelined
// round trip: the notification-service's per-tick read for every connected
// user of a queue. Replies map by user; a user whose read failed is absent.
func (s *Store) PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error) {
	if len(users) == 0 {
		return map[string]queue.Standing{}, nil
	}
	k := KeysFor(q)
	run := func() ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, len(users))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, u := range users {
				cmds[i] = positionScript.EvalSha(ctx, p, k.positionKeys(u), u)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := run()
	if err != nil && strings.Contains(err.Error(), "NOSCRIPT") {
		// A pipeline cannot fall back to EVAL per command: load the script
		// (the server lost its cache) and run the round again.
		if lerr := positionScript.Load(ctx, s.rdb).Err(); lerr != nil {
			return nil, classifyf("position many "+q, lerr)
		}
		cmds, err = run()
	}
	out := make(map[string]queue.Standing, len(users))
	for i, c := range cmds {
		res, cerr := c.Slice()
		if cerr != nil {
			continue
		}
		st, _, serr := standingReply(q, res)
		if serr == nil {
			out[users[i]] = st
		}
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("position many %s: %w", q, classify(err))
	}
	return out, nil
}
