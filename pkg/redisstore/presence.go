package redisstore

import (
	"context"
	"fmt"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// maxSightings is the most users one presence script is given (Lua's
// unpack has a limit; a bigger batch is split).
const maxSightings = 1000

// Sighted records that users of queue q showed a sign of life (a poll, an
// enter, an open event stream): one presence script a line and a thousand
// users, pipelined in one round trip (presence.lua). A waiting person is
// seen now; an away one comes back to their place. Nothing is written for
// a queue with presence off, or for people it does not track. It is safe
// to repeat, and losing one (a failover) only delays a sighting to the
// replica's next batch.
func (s *Store) Sighted(ctx context.Context, q string, users []string) (queue.Sightings, error) {
	if len(users) == 0 {
		return queue.Sightings{}, nil
	}
	shards, key, tags, err := s.route(ctx, q)
	if err != nil {
		return queue.Sightings{}, fmt.Errorf("sighted %s: %w", q, err)
	}
	byLine := make([][]string, shards)
	for _, u := range users {
		line := queue.LineOf(key, u, shards)
		byLine[line] = append(byLine[line], u)
	}
	type batch struct {
		id    string
		users []string
	}
	var batches []batch
	for line, us := range byLine {
		for i := 0; i < len(us); i += maxSightings {
			batches = append(batches, batch{id: lineKeyID(q, line, tags), users: us[i:min(i+maxSightings, len(us))]})
		}
	}
	cmds, err := s.evalAll(ctx, presenceScript, len(batches),
		func(i int) []string { return KeysFor(batches[i].id).presenceKeys() },
		func(i int) []any {
			args := make([]any, 0, 1+len(batches[i].users))
			args = append(args, KeysFor(batches[i].id).Prefix())
			for _, u := range batches[i].users {
				args = append(args, u)
			}
			return args
		})
	var got queue.Sightings
	for _, c := range cmds {
		res, cerr := c.Slice()
		if cerr != nil || len(res) != 2 {
			continue
		}
		got.Seen += intOf(res, 0)
		got.CameBack += intOf(res, 1)
	}
	if err != nil {
		return got, fmt.Errorf("sighted %s: %w", q, classify(err))
	}
	return got, nil
}
