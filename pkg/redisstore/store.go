package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// Store runs the queue operations against Redis.
type Store struct {
	rdb redis.UniversalClient
	// lines remembers the queues' line counts and lengths (lines.go).
	lines lineBook
	// ticks is the last tick id made (clock.go); clock estimates Redis's
	// clock and giveUp is how long the client waits for one command with
	// its retries, for the deadlines of requests that must not land late.
	ticks  atomic.Int64
	clock  redisClock
	giveUp time.Duration
	// repl is how many replicas must hold a change before it is
	// acknowledged (replicas.go).
	repl replication
	acks ackBatch
	// bg is the Store's own goroutines: clock readings, replica counts
	// read in the background, group-commit flushers handing over (Wait).
	bg background
	// slots is the cluster's slot map as the lines' report last read it
	// (tags.go).
	slots slotBook
}

// background runs a Store's own goroutines and waits for them; once Wait
// began it starts none (a call still running after a server's shutdown
// timeout must not add to a WaitGroup being waited for).
type background struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f in a goroutine of b's, or reports false after Wait began.
func (b *background) Go(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Go(f)
	return true
}

// Wait stops b from starting goroutines and waits for those it started.
func (b *background) Wait() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}

// NewStore returns a Store over rdb.
func NewStore(rdb redis.UniversalClient) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("redisstore: nil client")
	}
	s := &Store{rdb: rdb, giveUp: giveUpAfter(rdb)}
	s.clock.bg, s.repl.online.bg = &s.bg, &s.bg
	s.ticks.Store(time.Now().UnixMicro())
	return s, nil
}

// Wait returns once every goroutine the Store started in the background
// has ended (each is bounded by a timeout), and from then on the Store
// starts none: a clock or replica reading is skipped, a group commit's
// hand-over runs in its caller. Call it after the last call on the Store,
// before the client is closed. The error is always nil.
func (s *Store) Wait() error {
	s.bg.Wait()
	return nil
}

// Client is the underlying client, for adapters that share it (rate limits).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// LoadScripts preloads the gateway's scripts.
func (s *Store) LoadScripts(ctx context.Context) error {
	return LoadScripts(ctx, s.rdb, GatewayScripts...)
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return classify(s.rdb.Ping(ctx).Err())
}

// Enter gives user a place in line q (see lua/enter.lua). It returns
// queue.ErrNotFound, queue.ErrClosed or queue.ErrFull (with the standing's
// figures filled) when there is no place to give, and
// queue.ErrChallengeRequired on a queue that asks for a challenge.
func (s *Store) Enter(ctx context.Context, q, user string) (queue.Standing, error) {
	return s.EnterWithProof(ctx, q, user, queue.Proof{})
}

// EnterWithProof is Enter with a solved challenge, which a queue that asks
// for one accepts once (queue.ErrChallengeFailed otherwise). A zero proof
// is none.
func (s *Store) EnterWithProof(ctx context.Context, q, user string, proof queue.Proof) (queue.Standing, error) {
	var expires int64
	if proof.ID != "" {
		expires = proof.ExpiresAt.UnixMilli()
	}
	res, line, shards, err := s.lineRun(ctx, q, user, func(line, shards int) ([]any, error) {
		k, err := s.lineKeys(ctx, q, line)
		if err != nil {
			return nil, err
		}
		keys, args := k.enterKeys(user, proof.ID), []any{user, proof.ID, proof.Bits, expires, shards, telemetry.Sampled(ctx), s.ackFlag()}
		if s.acking() {
			return s.evalAcked(ctx, enterScript, keys, args...).Slice()
		}
		return enterScript.Run(ctx, s.rdb, keys, args...).Slice() // its span names EnterWithProof
	})
	if err != nil {
		return queue.Standing{}, fmt.Errorf("enter %s: %w", q, classify(err))
	}
	st, outcome, err := standingReply(q, res)
	if err != nil {
		return st, fmt.Errorf("enter %s: %w", q, err)
	}
	if st, err = s.toQueue(ctx, q, shards, line, st); err != nil {
		return st, fmt.Errorf("enter %s: %w", q, err)
	}
	switch outcome {
	case "CLOSED":
		return st, fmt.Errorf("enter %s: %w", q, queue.ErrClosed)
	case "FULL":
		return st, fmt.Errorf("enter %s: %w", q, queue.ErrFull)
	case "CHALLENGE_REQUIRED":
		return st, fmt.Errorf("enter %s: %w", q, queue.ErrChallengeRequired)
	case "CHALLENGE_FAILED":
		return st, fmt.Errorf("enter %s: %w", q, queue.ErrChallengeFailed)
	}
	return st, nil
}

// Position reads where user stands in queue q, in one round trip; a
// WAITING standing carries its place's sequence number and the queue's
// generation (for a ticket).
func (s *Store) Position(ctx context.Context, q, user string) (queue.Standing, error) {
	res, line, shards, err := s.lineRun(ctx, q, user, func(line, shards int) ([]any, error) {
		k, err := s.lineKeys(ctx, q, line)
		if err != nil {
			return nil, err
		}
		return positionScript.Run(ctx, s.rdb, k.positionKeys(user), user, "1", shards).Slice()
	})
	if err != nil {
		return queue.Standing{}, fmt.Errorf("position %s: %w", q, classify(err))
	}
	st, _, err := standingReply(q, res)
	if err != nil {
		return st, fmt.Errorf("position %s: %w", q, err)
	}
	if st, err = s.toQueue(ctx, q, shards, line, st); err != nil {
		return st, fmt.Errorf("position %s: %w", q, err)
	}
	return st, nil
}

// Leave takes user out of line q, or out of its pre-queue. It reports
// whether the user was waiting (or pre-queued).
func (s *Store) Leave(ctx context.Context, q, user string) (bool, error) {
	for attempt := 0; ; attempt++ {
		line, shards, err := s.userLine(ctx, q, user)
		if err != nil {
			return false, fmt.Errorf("leave %s: %w", q, err)
		}
		k, err := s.lineKeys(ctx, q, line)
		if err != nil {
			return false, fmt.Errorf("leave %s: %w", q, err)
		}
		n, err := leaveScript.Run(ctx, s.rdb, k.leaveKeys(user), user, shards).Int64()
		switch {
		case err != nil:
			return false, fmt.Errorf("leave %s: %w", q, classify(err))
		case n == -1:
			return false, fmt.Errorf("leave %s: %w", q, queue.ErrNotFound)
		case n == -2:
			return false, fmt.Errorf("leave %s: its line count is being changed: %w", q, queue.ErrUnavailable)
		case n < -2 && attempt == 0:
			s.lines.noteShards(q, int(-2-n)) // routed by a stale count: once more
		case n < -2:
			return false, fmt.Errorf("leave %s: line count changed twice: %w", q, queue.ErrUnavailable)
		default:
			return n == 1, nil
		}
	}
}

// Close stops entries to q and drops its waiting line and pre-queue,
// returning how many people were in them.
//
// A queue split into lines is closed line by line, line 0 first (enters
// route by it: a refused line count sends them there).
func (s *Store) Close(ctx context.Context, q string) (int64, error) {
	return s.CloseBy(ctx, q, queue.Change{})
}

// CloseBy is Close on an operator's behalf: the close of the queue's first
// line also writes their QueueChanged (action CLOSED: the state before,
// and how many people were dropped) to its outbox, in the same script.
func (s *Store) CloseBy(ctx context.Context, q string, by queue.Change) (int64, error) {
	shards, err := s.Shards(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("close %s: %w", q, err)
	}
	var total int64
	for line := range shards {
		var args []any
		if line == 0 && by != (queue.Change{}) {
			args = []any{by.Actor, by.Address, q}
		}
		k, err := s.lineKeys(ctx, q, line)
		if err != nil {
			return total, fmt.Errorf("close %s: %w", q, err)
		}
		n, err := closeScript.Run(ctx, s.rdb, k.closeKeys(), args...).Int64()
		if err != nil {
			return total, fmt.Errorf("close %s: %w", q, classify(err))
		}
		if n < 0 && line == 0 {
			return 0, fmt.Errorf("close %s: %w", q, queue.ErrNotFound)
		}
		total += max(0, n)
		// The replicas' frontier caches read the line again, and answer
		// its tickets from Redis from then on. Best effort: a cache that
		// misses it reads the line within FrontierOptions.Fresh anyway.
		_ = s.rdb.Publish(ctx, FrontierChannel, queue.LineID(q, line)+" "+frontierChanged).Err()
	}
	return total, nil
}

// Queues lists the known queue ids.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	ids, err := s.rdb.SMembers(ctx, QueuesKey).Result()
	if err != nil {
		return nil, fmt.Errorf("queues: %w", classify(err))
	}
	return ids, nil
}

// Waiting returns the length of each named queue's line (all its lines'),
// in one pipeline.
func (s *Store) Waiting(ctx context.Context, ids []string) (map[string]int64, error) {
	type card struct {
		id  string
		cmd *redis.IntCmd
	}
	var cmds []card
	shards := make([]int, len(ids))
	tags := make([][]string, len(ids))
	for i, id := range ids {
		n, _, t, err := s.route(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("waiting: %w", err)
		}
		shards[i], tags[i] = n, t
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			for line := range shards[i] {
				cmds = append(cmds, card{id, p.ZCard(ctx, KeysFor(lineKeyID(id, line, tags[i])).Waiting())})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting: %w", classify(err))
	}
	out := make(map[string]int64, len(ids))
	for _, c := range cmds {
		out[c.id] += c.cmd.Val()
	}
	return out, nil
}

// standingReply decodes the reply layout of lua/prelude.lua's reply().
func standingReply(q string, res []any) (queue.Standing, string, error) {
	st := queue.Standing{QueueID: q}
	if len(res) == 0 {
		return st, "", errors.New("empty script reply")
	}
	outcome, _ := res[0].(string)
	if outcome == "NOT_FOUND" {
		return st, outcome, queue.ErrNotFound
	}
	if len(res) < 6 {
		return st, outcome, fmt.Errorf("short script reply (%d values)", len(res))
	}
	st.QueueState = queue.State(str(res[1]))
	st.ConfiguredRate = float(res[2])
	st.MeasuredRate = float(res[3])
	st.Total, _ = res[4].(int64)
	st.Position, _ = res[5].(int64)
	if len(res) >= 10 {
		st.LeaveShare = float(res[6])
		if ms := intOf(res, 7); ms > 0 {
			st.StartsAt = time.UnixMilli(ms).UTC()
			st.StartsIn = time.Duration(intOf(res, 8)) * time.Millisecond
			st.PreQueued = intOf(res, 9)
		}
	}
	st.Seq, st.Generation = intOf(res, 14), intOf(res, 15)
	switch outcome {
	case "WAITING":
		st.State = queue.Waiting
	case "ADMITTED", "ORDERING":
		st.State = queue.Admitted
		st.Ordering = outcome == "ORDERING"
		if len(res) >= 14 && res[10] != nil {
			st.Token = &queue.Token{
				Secret:     str(res[10]),
				ID:         str(res[11]),
				ActivateAt: msTime(res[12]),
				ExpiresAt:  msTime(res[13]),
			}
		}
	case "PRE_QUEUE":
		st.State = queue.PreQueue
	case "ORDERED":
		st.State = queue.Ordered
	case "EXPIRED":
		st.State = queue.Expired
	case "ABANDONED":
		st.State = queue.Abandoned
	case "NOT_IN_QUEUE", "CLOSED", "FULL", "CHALLENGE_REQUIRED", "CHALLENGE_FAILED":
		st.State = queue.NotInQueue
	default:
		return st, outcome, fmt.Errorf("unknown script outcome %q", outcome)
	}
	return st, outcome, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func float(v any) float64 {
	f, _ := strconv.ParseFloat(str(v), 64)
	return f
}

func msTime(v any) time.Time {
	ms, err := strconv.ParseInt(str(v), 10, 64)
	if err != nil || ms <= 0 {
		// The scripts answer 0 for a time that has not come (a draw not
		// started or not done): the zero time, never 1970.
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Purge deletes queue q entirely: every key of it and its registration.
// Operators close queues (Close); Purge is for tests and tooling that must
// leave nothing behind.
func (s *Store) Purge(ctx context.Context, q string) error {
	if err := s.rdb.SRem(ctx, QueuesKey, q).Err(); err != nil {
		return classifyf("purge "+q, err)
	}
	k := KeysFor(q)
	// On a cluster the keys of q's lines are in as many slots as it has
	// lines (wr:{q}:..., wr:{q:1}:... or, tagged, wr:{q:1~17}:...; no
	// queue id has a ':' or a '~'), so every master is scanned
	// (ForEachMaster covers both topologies) and the keys are deleted one
	// a command, pipelined. Purging a line (q:1) takes its tagged keys
	// too.
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, pattern := range []string{k.Prefix() + "*", "wr:{" + q + ":*", "wr:{" + q + "~*"} {
			iter := c.Scan(ctx, 0, pattern, 500).Iterator()
			var keys []string
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if err := iter.Err(); err != nil {
				return err
			}
			for i := 0; i < len(keys); i += 500 {
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for _, key := range keys[i:min(i+500, len(keys))] {
						p.Del(ctx, key)
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.rdb)
	}
	return classifyf("purge "+q, err)
}
