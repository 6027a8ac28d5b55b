package wire

import (
	"context"
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/presence"
	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// failOpen answers the standings of a queue that fails OPEN with BYPASS
// while Redis is down (this replica's probe, the cache's refreshes, finds
// it so: one failed round while it is up keeps its error), from the
// configurations the cache kept: an open stream is told at its next
// position event, and a new one opens with it, instead of a 503. A stream
// carries no secret, so the page fetches its pass from the gateway.
type failOpen struct {
	stream.Positions
	cache *redisstore.ConfigCache
}

func (f failOpen) bypass(q string, err error) (queue.Standing, bool) {
	if !errors.Is(err, queue.ErrUnavailable) || f.cache.Reachable() {
		return queue.Standing{}, false
	}
	cfg, ok := f.cache.Get(q)
	if !ok || !cfg.Bypasses(time.Now()) {
		return queue.Standing{}, false
	}
	return queue.BypassStanding(q, cfg), true
}

func (f failOpen) Position(ctx context.Context, q, user string) (queue.Standing, error) {
	st, err := f.Positions.Position(ctx, q, user)
	if b, ok := f.bypass(q, err); ok {
		return b, nil
	}
	return st, err
}

func (f failOpen) PositionMany(ctx context.Context, q string, users []string) (map[string]queue.Standing, error) {
	sts, err := f.Positions.PositionMany(ctx, q, users)
	if b, ok := f.bypass(q, err); ok {
		sts = make(map[string]queue.Standing, len(users))
		for _, u := range users {
			sts[u] = b
		}
		return sts, nil
	}
	return sts, err
}

// presenceOn passes the sightings of open streams to book for the queues
// whose configuration (as the cache has it) turns presence on.
type presenceOn struct {
	book    *presence.Book
	configs *redisstore.ConfigCache
}

func (p presenceOn) Saw(q, user string) {
	if cfg, ok := p.configs.Get(q); ok && cfg.AwayAfterSeconds > 0 {
		p.book.Saw(q, user)
	}
}
