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

// OutboxGroup is the consumer group relays read a queue's outbox with.
const OutboxGroup = "relay"

// EnsureOutboxGroup creates the relay group of q's outbox (and the stream),
// starting at the beginning so nothing written before it is skipped. It does
// nothing when q has no configuration (deleted).
func (s *Store) EnsureOutboxGroup(ctx context.Context, q string) error {
	k, err := s.keysOf(ctx, q)
	if err != nil {
		return fmt.Errorf("outbox group %s: %w", q, err)
	}
	return classifyf("outbox group "+q, groupScript.Run(ctx, s.rdb, []string{k.Config(), k.Outbox()}, OutboxGroup).Err())
}

// ReadOutboxes reads up to count events of each queue in reads for
// consumer, in one pipelined round and without blocking: a relay serving
// hundreds of queues holds no connection waiting on a stream, so admission
// ticks never wait for one. A read that failed on its own (the group is
// missing, the slot is moving) is reported in its batch; a round that could
// not be sent at all is the error.
func (s *Store) ReadOutboxes(ctx context.Context, consumer string, count int64, reads []queue.OutboxRead) ([]queue.OutboxBatch, error) {
	if len(reads) == 0 {
		return nil, nil
	}
	ids := make([]string, len(reads))
	for i, r := range reads {
		ids[i] = r.QueueID
	}
	keys, _ := s.keysOfIDs(ctx, ids)
	cmds := make([]*redis.XStreamSliceCmd, len(reads))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range reads {
			if keys[i].err != nil {
				continue
			}
			id := ">"
			if r.Pending {
				id = "0"
			}
			cmds[i] = p.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: OutboxGroup, Consumer: consumer, Streams: []string{keys[i].k.Outbox(), id}, Count: count, Block: -1,
			})
		}
		return nil
	})
	out := make([]queue.OutboxBatch, len(reads))
	failed := 0
	for i, r := range reads {
		out[i].QueueID = r.QueueID
		if keys[i].err != nil {
			out[i].Err = fmt.Errorf("read outbox %s: %w", r.QueueID, keys[i].err)
			failed++
			continue
		}
		res, cerr := cmds[i].Result()
		switch {
		case cerr == nil:
			if len(res) > 0 {
				out[i].Events = decodeEvents(r.QueueID, res[0].Messages)
			}
		case errors.Is(cerr, redis.Nil):
		default:
			out[i].Err = classifyf("read outbox "+r.QueueID, cerr)
			failed++
		}
	}
	if err != nil && !errors.Is(err, redis.Nil) && failed == len(reads) {
		return out, classifyf("read outboxes", err)
	}
	return out, nil
}

// ClaimOutbox takes over events other consumers read but did not
// acknowledge for at least minIdle: the relay of a leader that died.
func (s *Store) ClaimOutbox(ctx context.Context, q, consumer string, minIdle time.Duration, count int64) ([]queue.Event, error) {
	k, err := s.keysOf(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("claim outbox %s: %w", q, err)
	}
	msgs, _, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream: k.Outbox(), Group: OutboxGroup, Consumer: consumer, MinIdle: minIdle, Start: "0-0", Count: count,
	}).Result()
	if err != nil {
		return nil, classifyf("claim outbox "+q, err)
	}
	return decodeEvents(q, msgs), nil
}

// AckOutboxes acknowledges published events and deletes them, every
// queue's in one round: the outbox only ever holds what the broker has not
// confirmed. Acknowledge and delete go together (lua/outbox_ack.lua, one
// script a stream), so an entry is never left in the stream but out of the
// pending list.
func (s *Store) AckOutboxes(ctx context.Context, batches []queue.OutboxBatch) error {
	var acks []queue.OutboxBatch
	for _, b := range batches {
		if len(b.Events) > 0 {
			acks = append(acks, b)
		}
	}
	if len(acks) == 0 {
		return nil
	}
	keys, err := s.keysOfAll(ctx, len(acks), func(i int) string { return acks[i].QueueID })
	if err != nil {
		return fmt.Errorf("ack outbox %w", err)
	}
	cmds, err := s.evalAll(ctx, ackScript, len(acks),
		func(i int) []string { return []string{keys[i].Outbox(), keys[i].Dispatch()} },
		func(i int) []any { return ackArgs(acks[i].Events) })
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil {
			return classifyf("ack outbox", cerr)
		}
	}
	return classifyf("ack outbox", err)
}

// ackArgs are outbox_ack.lua's arguments for events: the group, the
// TokensIssued entries read back as several events (their stream id and
// people beyond the first), then every other entry's stream id.
func ackArgs(events []queue.Event) []any {
	var ids []string
	people := map[string]int{}
	for _, e := range events {
		if people[e.StreamID] == 0 {
			ids = append(ids, e.StreamID)
		}
		people[e.StreamID]++
	}
	args := []any{OutboxGroup, 0}
	k := 0
	for _, id := range ids {
		if n := people[id]; n > 1 {
			args = append(args, id, n-1)
			k++
		}
	}
	args[1] = k
	for _, id := range ids {
		if people[id] == 1 {
			args = append(args, id)
		}
	}
	return args
}

// AckOutbox acknowledges and deletes events of one queue (see AckOutboxes).
func (s *Store) AckOutbox(ctx context.Context, q string, events []queue.Event) error {
	return s.AckOutboxes(ctx, []queue.OutboxBatch{{QueueID: q, Events: events}})
}

// OutboxLen is the number of events of q not yet confirmed by the broker.
func (s *Store) OutboxLen(ctx context.Context, q string) (int64, error) {
	n, err := s.OutboxLens(ctx, []string{q})
	return n[q], err
}

// OutboxLens is the number of unconfirmed events of every queue in qs, in
// one pipelined round: a TokensIssued entry counts as its people, as the
// outbox bound counts them (outbox_people, lua/prelude.lua).
func (s *Store) OutboxLens(ctx context.Context, qs []string) (map[string]int64, error) {
	keys, err := s.keysOfAll(ctx, len(qs), func(i int) string { return qs[i] })
	if err != nil {
		return nil, fmt.Errorf("outbox lengths: %w", err)
	}
	lens := make([]*redis.IntCmd, len(qs))
	extras := make([]*redis.StringCmd, len(qs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range qs {
			lens[i] = p.XLen(ctx, keys[i].Outbox())
			extras[i] = p.HGet(ctx, keys[i].Dispatch(), "outboxExtra")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, classifyf("outbox lengths", err)
	}
	out := make(map[string]int64, len(qs))
	for i, q := range qs {
		if err := lens[i].Err(); err != nil {
			return nil, classifyf("outbox lengths", err)
		}
		n := lens[i].Val()
		if extra, _ := extras[i].Int64(); n > 0 && extra > 0 {
			n += extra
		}
		out[q] = n
	}
	return out, nil
}

// PruneOutboxConsumers deletes the relay group's consumers of q other than
// self that have nothing pending and were idle for at least idle: every
// dispatcher process that ever led q left its name there.
func (s *Store) PruneOutboxConsumers(ctx context.Context, q, self string, idle time.Duration) (int, error) {
	k, err := s.keysOf(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("outbox consumers %s: %w", q, err)
	}
	key := k.Outbox()
	cs, err := s.rdb.XInfoConsumers(ctx, key, OutboxGroup).Result()
	if err != nil {
		return 0, classifyf("outbox consumers "+q, err)
	}
	n := 0
	for _, c := range cs {
		if c.Name == self || c.Pending > 0 || c.Idle < idle {
			continue
		}
		if err := s.rdb.XGroupDelConsumer(ctx, key, OutboxGroup, c.Name).Err(); err != nil {
			return n, classifyf("outbox consumers "+q, err)
		}
		n++
	}
	return n, nil
}

func decodeEvents(q string, msgs []redis.XMessage) []queue.Event {
	// Sized for everyone at once: a TokensIssued entry is thousands of
	// events, and growing the slice entry by entry copied them over and
	// over.
	n := 0
	for _, m := range msgs {
		if users, _ := m.Values["users"].(string); users != "" {
			n += strings.Count(users, " ") + 1
		} else {
			n++
		}
	}
	out := make([]queue.Event, 0, n)
	for _, m := range msgs {
		v := func(k string) string { s, _ := m.Values[k].(string); return s }
		ms := func(k string) time.Time {
			n, err := strconv.ParseInt(v(k), 10, 64)
			if err != nil || n == 0 {
				return time.Time{}
			}
			return time.UnixMilli(n).UTC()
		}
		num := func(k string) int64 { n, _ := strconv.ParseInt(v(k), 10, 64); return n }
		qid := v("q")
		if qid == "" {
			qid = q
		}
		if v("type") == tokensIssued {
			out = append(out, tokensFrom(m.ID, qid, v, ms)...)
			continue
		}
		out = append(out, queue.Event{
			StreamID: m.ID, Type: v("type"), ID: v("eid"), QueueID: qid, UserID: v("user"),
			TokenID: v("tid"), OrderID: v("oid"), Reason: v("reason"), Seq: num("seq"),
			ActivateAt: ms("act"), ExpiresAt: ms("exp"), OccurredAt: ms("at"),
			RemainingTTL: time.Duration(num("rem")) * time.Millisecond,
			StartsAt:     ms("starts"), SeedSHA256: v("sha"), Seed: v("seed"),
			PreQueued: num("pre"), Placed: num("placed"), FirstSeq: num("first"), LastSeq: num("last"),
			Actor: v("actor"), Address: v("addr"), Before: v("before"), After: v("after"), ETag: v("etag"),
			Created: v("created") == "1", Closed: v("closed") == "1", Worded: v("worded") == "1", Outcome: v("outcome"), Refusal: v("refusal"),
			TraceParent: v("tp"), TraceState: v("ts"),
		})
		if e := &out[len(out)-1]; e.Type == queue.EventQueueMinute {
			e.LineID, e.Minute, e.Counts = v("line"), ms("min"), minuteCounts(v, num)
		}
	}
	return out
}

// tokensIssued is the outbox entry of a tick's admitted (issue.lua): the
// store reads it back as a TokenIssued each.
const tokensIssued = "TokensIssued"

// tokensFrom reads a TokensIssued entry (stream id id; v and ms read its
// fields) as its people's TokenIssued events, in admission order, all with
// the entry's stream id. Its lists are space-separated and of one length;
// an entry whose lists differ (no script of ours writes one) yields the
// people all lists name.
func tokensFrom(id, q string, v func(string) string, ms func(string) time.Time) []queue.Event {
	users, tids, seqs, acts := strings.Fields(v("users")), strings.Fields(v("tids")), strings.Fields(v("seqs")), strings.Fields(v("acts"))
	ttl, _ := strconv.ParseInt(v("ttl"), 10, 64)
	at := ms("at")
	n := min(len(users), len(tids), len(seqs), len(acts))
	out := make([]queue.Event, n)
	for i := range n {
		seq, _ := strconv.ParseInt(seqs[i], 10, 64)
		act, _ := strconv.ParseInt(acts[i], 10, 64)
		out[i] = queue.Event{
			StreamID: id, Type: queue.EventTokenIssued, ID: tids[i] + ".issued", QueueID: q, UserID: users[i], TokenID: tids[i],
			Seq: seq, ActivateAt: time.UnixMilli(act).UTC(), ExpiresAt: time.UnixMilli(act + ttl).UTC(), OccurredAt: at,
			TraceParent: v("tp"), TraceState: v("ts"),
		}
	}
	return out
}

// minuteCounts reads a QueueMinute entry's figures (v and num read its
// fields); the histogram's "<bucket>:<count>" pairs become a dense list.
func minuteCounts(v func(string) string, num func(string) int64) queue.MinuteCounts {
	c := queue.MinuteCounts{
		Arrivals: num("arr"), Admitted: num("adm"), ExpiredUnused: num("exp"), Left: num("left"), Abandoned: num("aband"),
		WaitMax: time.Duration(num("wmax")) * time.Millisecond,
	}
	for _, pair := range strings.Split(v("wb"), ",") {
		b, n, ok := strings.Cut(pair, ":")
		i, err1 := strconv.Atoi(b)
		k, err2 := strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil || i < 0 || i >= queue.WaitBuckets {
			continue
		}
		for len(c.WaitHistogram) <= i {
			c.WaitHistogram = append(c.WaitHistogram, 0)
		}
		c.WaitHistogram[i] += k
	}
	return c
}
