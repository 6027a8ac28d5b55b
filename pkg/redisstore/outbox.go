package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// OutboxGroup is the consumer group relays read a queue's outbox with.
const OutboxGroup = "relay"

// EnsureOutboxGroup creates the relay group of q's outbox (and the stream),
// starting at the beginning so nothing written before it is skipped.
func (s *Store) EnsureOutboxGroup(ctx context.Context, q string) error {
	err := s.rdb.XGroupCreateMkStream(ctx, KeysFor(q).Outbox(), OutboxGroup, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return classifyf("outbox group "+q, err)
	}
	return nil
}

// ReadOutbox returns up to count events for consumer: first the ones it
// read before and has not acknowledged (a publish that failed), then new
// ones, waiting up to block for them.
func (s *Store) ReadOutbox(ctx context.Context, q, consumer string, count int64, block time.Duration) ([]queue.Event, error) {
	key := KeysFor(q).Outbox()
	for _, id := range []string{"0", ">"} {
		b := time.Duration(-1) // no BLOCK for the pending read
		if id == ">" {
			b = block
		}
		res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: OutboxGroup, Consumer: consumer, Streams: []string{key, id}, Count: count, Block: b,
		}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, classifyf("read outbox "+q, err)
		}
		if len(res) > 0 && len(res[0].Messages) > 0 {
			return decodeEvents(q, res[0].Messages), nil
		}
	}
	return nil, nil
}

// ClaimOutbox takes over events other consumers read but did not
// acknowledge for at least minIdle: the relay of a leader that died.
func (s *Store) ClaimOutbox(ctx context.Context, q, consumer string, minIdle time.Duration, count int64) ([]queue.Event, error) {
	msgs, _, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: KeysFor(q).Outbox(), Group: OutboxGroup, Consumer: consumer, MinIdle: minIdle, Start: "0-0", Count: count,
	}).Result()
	if err != nil {
		return nil, classifyf("claim outbox "+q, err)
	}
	return decodeEvents(q, msgs), nil
}

// AckOutbox acknowledges published events and deletes them: the outbox
// only ever holds what is not yet confirmed by the broker.
func (s *Store) AckOutbox(ctx context.Context, q string, streamIDs []string) error {
	if len(streamIDs) == 0 {
		return nil
	}
	key := KeysFor(q).Outbox()
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, key, OutboxGroup, streamIDs...)
		p.XDel(ctx, key, streamIDs...)
		return nil
	})
	return classifyf("ack outbox "+q, err)
}

// OutboxLen is the number of events of q not yet confirmed by the broker.
func (s *Store) OutboxLen(ctx context.Context, q string) (int64, error) {
	n, err := s.rdb.XLen(ctx, KeysFor(q).Outbox()).Result()
	return n, classifyf("outbox length "+q, err)
}

func decodeEvents(q string, msgs []redis.XMessage) []queue.Event {
	out := make([]queue.Event, 0, len(msgs))
	for _, m := range msgs {
		v := func(k string) string { s, _ := m.Values[k].(string); return s }
		ms := func(k string) time.Time {
			n, err := strconv.ParseInt(v(k), 10, 64)
			if err != nil || n == 0 {
				return time.Time{}
			}
			return time.UnixMilli(n).UTC()
		}
		seq, _ := strconv.ParseInt(v("seq"), 10, 64)
		rem, _ := strconv.ParseInt(v("rem"), 10, 64)
		qid := v("q")
		if qid == "" {
			qid = q
		}
		out = append(out, queue.Event{
			StreamID: m.ID, Type: v("type"), ID: v("eid"), QueueID: qid, UserID: v("user"),
			TokenID: v("tid"), OrderID: v("oid"), Reason: v("reason"), Seq: seq,
			ActivateAt: ms("act"), ExpiresAt: ms("exp"), OccurredAt: ms("at"),
			RemainingTTL: time.Duration(rem) * time.Millisecond,
		})
	}
	return out
}
