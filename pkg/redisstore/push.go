package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Web Push subscriptions (wr:{q}:push:<user>) and the marks of the pushes
// sent (wr:{q}:pushed:<tokenId>). The notification-service checks a
// subscription before it is stored; here it is bytes.

// SavePush stores a user's subscription id in q for ttl, evicting the
// oldest of theirs past most; it returns how many were evicted, or
// queue.ErrNotFound when q does not exist.
func (s *Store) SavePush(ctx context.Context, q, user, id string, sub []byte, ttl time.Duration, most int) (int, error) {
	if len(sub) == 0 || most < 1 || ttl <= 0 {
		return 0, fmt.Errorf("push %s: empty subscription, no room or no lifetime", q)
	}
	n, err := pushScript.Run(ctx, s.rdb, KeysFor(q).pushKeys(user), "save", id, time.Now().UnixMilli(), string(sub),
		ttl.Milliseconds(), most).Int64()
	if err != nil {
		return 0, fmt.Errorf("push %s: %w", q, classify(err))
	}
	if n < 0 {
		return 0, fmt.Errorf("push %s: %w", q, queue.ErrNotFound)
	}
	return int(n), nil
}

// DropPush removes a user's subscription id from q and reports whether it
// was there; queue.ErrNotFound when q does not exist.
func (s *Store) DropPush(ctx context.Context, q, user, id string) (bool, error) {
	n, err := pushScript.Run(ctx, s.rdb, KeysFor(q).pushKeys(user), "drop", id).Int64()
	if err != nil {
		return false, fmt.Errorf("push %s: %w", q, classify(err))
	}
	if n < 0 {
		return false, fmt.Errorf("push %s: %w", q, queue.ErrNotFound)
	}
	return n == 1, nil
}

// PushSubscriptions reads a user's subscriptions in q: id -> JSON.
func (s *Store) PushSubscriptions(ctx context.Context, q, user string) (map[string][]byte, error) {
	m, err := s.rdb.HGetAll(ctx, KeysFor(q).Push(user)).Result()
	if err != nil {
		return nil, fmt.Errorf("push %s: %w", q, classify(err))
	}
	out := make(map[string][]byte, len(m))
	for id, v := range m {
		if _, sub, ok := strings.Cut(v, "|"); ok {
			out[id] = []byte(sub)
		}
	}
	return out, nil
}

// ClaimPush marks tokenID's push as sent until the token expires, and
// reports whether this call marked it (false: it was sent before).
func (s *Store) ClaimPush(ctx context.Context, q, tokenID string, until time.Time) (bool, error) {
	ttl := until.Sub(time.Now())
	if ttl < time.Second {
		ttl = time.Second
	}
	ok, err := s.rdb.SetNX(ctx, KeysFor(q).Pushed(tokenID), "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("push %s: %w", q, classify(err))
	}
	return ok, nil
}

// UnclaimPush takes back tokenID's mark, when its push could not be sent
// and is to be tried again.
func (s *Store) UnclaimPush(ctx context.Context, q, tokenID string) error {
	if err := s.rdb.Del(ctx, KeysFor(q).Pushed(tokenID)).Err(); err != nil {
		return fmt.Errorf("push %s: %w", q, classify(err))
	}
	return nil
}

// EndPush lets a user's subscriptions in q end at at (the token's expiry,
// once its "your turn" went out), unless they end sooner.
func (s *Store) EndPush(ctx context.Context, q, user string, at time.Time) error {
	err := s.rdb.Do(ctx, "PEXPIREAT", KeysFor(q).Push(user), strconv.FormatInt(at.UnixMilli(), 10), "LT").Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("push %s: %w", q, classify(err))
	}
	return nil
}
