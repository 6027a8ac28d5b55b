package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// A queue's own wording of the waiting page: per language, a JSON object
// of the messages that replace the page's (wr:{q}:texts). The gateway
// checks a wording before it is stored; here it is bytes.

// PutTexts stores q's wording in lang; queue.ErrNotFound when q does not
// exist. It reports whether lang had one before. An operator's change (by
// not zero) writes its QueueChanged (action WORDED) with it.
func (s *Store) PutTexts(ctx context.Context, q, lang string, msgs []byte, by queue.Change) (bool, error) {
	if len(msgs) == 0 {
		return false, fmt.Errorf("texts %s %s: empty", q, lang)
	}
	return s.texts(ctx, q, lang, string(msgs), by)
}

// DeleteTexts removes q's wording in lang and reports whether there was
// one; queue.ErrNotFound when q does not exist. An operator's change
// writes its QueueChanged with it.
func (s *Store) DeleteTexts(ctx context.Context, q, lang string, by queue.Change) (bool, error) {
	return s.texts(ctx, q, lang, "", by)
}

func (s *Store) texts(ctx context.Context, q, lang, msgs string, by queue.Change) (bool, error) {
	n, err := textsScript.Run(ctx, s.rdb, KeysFor(q).textsKeys(), lang, msgs, by.Actor, by.Address, q).Int64()
	if err != nil {
		return false, fmt.Errorf("texts %s %s: %w", q, lang, classify(err))
	}
	if n < 0 {
		return false, fmt.Errorf("texts %s %s: %w", q, lang, queue.ErrNotFound)
	}
	return n == 1, nil
}

// Texts reads q's wording in lang: nil when it has none.
func (s *Store) Texts(ctx context.Context, q, lang string) ([]byte, error) {
	b, err := s.rdb.HGet(ctx, KeysFor(q).Texts(), lang).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("texts %s %s: %w", q, lang, classify(err))
	}
	return b, nil
}

// AllTexts reads q's wording in every language it has one in.
func (s *Store) AllTexts(ctx context.Context, q string) (map[string][]byte, error) {
	m, err := s.rdb.HGetAll(ctx, KeysFor(q).Texts()).Result()
	if err != nil {
		return nil, fmt.Errorf("texts %s: %w", q, classify(err))
	}
	out := make(map[string][]byte, len(m))
	for lang, v := range m {
		out[lang] = []byte(v)
	}
	return out, nil
}
