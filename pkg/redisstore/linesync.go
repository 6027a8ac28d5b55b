package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Each line of a queue split into lines has a copy of the queue's config
// (line 0's, the queue's own) with `line` set to its index: the line's
// scripts run in its slot and read their knobs there. The copies are
// written after every config change (UpdateConfig) and again by the
// dispatcher's leader when a line's copy lags (its `version` differs from
// the queue's): a writer that died between the two is repaired within a
// tick.

// reshardingFor is how long lines refuse enters while their count changes;
// a writer that died in between holds them no longer than this.
const reshardingFor = 10 * time.Second

// lineLocalFields are config fields never copied to a line: a line's own,
// and the line key, which only the services that route read (from line 0).
var lineLocalFields = map[string]bool{"line": true, "drawPending": true, "resharding": true, "lineKey": true, lineTagsField: true}

// SyncLines copies queue q's config to each of its lines 1..shards-1, with
// a scheduled draw's seed for a line that has no draw yet, and returns how
// many lines it wrote. A line whose copy is at the queue's version is left.
func (s *Store) SyncLines(ctx context.Context, q string) (int, error) {
	main := KeysFor(q)
	var cfg *redis.MapStringStringCmd
	var drawCmd *redis.SliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		cfg = p.HGetAll(ctx, main.Config())
		drawCmd = p.HMGet(ctx, main.Draw(), "state", "seed", "seedSha256")
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sync lines of %s: %w", q, classify(err))
	}
	h, draw := cfg.Val(), drawCmd.Val()
	if len(h) == 0 {
		return 0, fmt.Errorf("sync lines of %s: %w", q, queue.ErrNotFound)
	}
	shards, _ := strconv.Atoi(h["shards"])
	tags, err := parseLineTags(h[lineTagsField])
	if err != nil {
		return 0, fmt.Errorf("sync lines of %s: %w", q, err)
	}
	version := h["version"]
	wrote := 0
	for line := 1; line < shards; line++ {
		k := KeysFor(lineKeyID(q, line, tags))
		cur, err := s.rdb.HMGet(ctx, k.Config(), "version", "line").Result()
		if err != nil {
			return wrote, fmt.Errorf("sync lines of %s: %w", q, classify(err))
		}
		if str(cur[0]) == version && str(cur[1]) == strconv.Itoa(line) {
			continue
		}
		fields := make([]any, 0, 2*len(h)+2)
		for f, v := range h {
			if !lineLocalFields[f] {
				fields = append(fields, f, v)
			}
		}
		fields = append(fields, "line", line)
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, k.Config(), fields...)
			p.HDel(ctx, k.Config(), "resharding")
			if str(draw[0]) == string(queue.DrawScheduled) {
				// The same seed on every line: each draws its own
				// pre-queue in the order the seed gives.
				p.HSetNX(ctx, k.Draw(), "state", string(queue.DrawScheduled))
				p.HSetNX(ctx, k.Draw(), "seed", str(draw[1]))
				p.HSetNX(ctx, k.Draw(), "seedSha256", str(draw[2]))
				p.HSet(ctx, k.Config(), "drawPending", 1)
			}
			return nil
		})
		if err != nil {
			return wrote, fmt.Errorf("sync lines of %s: line %d: %w", q, line, classify(err))
		}
		wrote++
	}
	return wrote, nil
}

// holdLines marks lines 0..shards-1 of q as being resharded (their scripts
// refuse enters, positions and leaves for reshardingFor) and reports
// whether every one of them is empty: nobody waiting, pre-queued, holding
// a token or ordering. It is the first step of a change of the line
// count; releaseLines undoes it.
func (s *Store) holdLines(ctx context.Context, q string, shards int) (bool, error) {
	until := time.Now().Add(reshardingFor).UnixMilli()
	tags, err := s.storedLineTags(ctx, q)
	if err != nil {
		return false, fmt.Errorf("reshard %s: %w", q, err)
	}
	for line := range shards {
		if err := s.rdb.HSet(ctx, KeysFor(lineKeyID(q, line, tags)).Config(), "resharding", until).Err(); err != nil {
			return false, fmt.Errorf("reshard %s: %w", q, classify(err))
		}
	}
	counts := make([]*redis.IntCmd, 0, 4*shards)
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for line := range shards {
			k := KeysFor(lineKeyID(q, line, tags))
			counts = append(counts, p.ZCard(ctx, k.Waiting()), p.ZCard(ctx, k.PreQueue()), p.ZCard(ctx, k.Active()), p.ZCard(ctx, k.Inflight()))
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("reshard %s: %w", q, classify(err))
	}
	for _, c := range counts {
		if c.Val() > 0 {
			return false, nil
		}
	}
	return true, nil
}

// releaseLines lifts holdLines from lines 0..shards-1 of q.
func (s *Store) releaseLines(ctx context.Context, q string, shards int) error {
	tags, err := s.storedLineTags(ctx, q)
	if err != nil {
		return fmt.Errorf("reshard %s: %w", q, err)
	}
	for line := range shards {
		if err := s.rdb.HDel(ctx, KeysFor(lineKeyID(q, line, tags)).Config(), "resharding").Err(); err != nil {
			return fmt.Errorf("reshard %s: %w", q, classify(err))
		}
	}
	return nil
}

// dropLines removes lines from..to-1 of q, left empty by a smaller line
// count: their config copies, so nothing routes there, and their other
// keys.
func (s *Store) dropLines(ctx context.Context, q string, from, to int) error {
	for line := from; line < to; line++ {
		if err := s.Purge(ctx, queue.LineID(q, line)); err != nil {
			return err
		}
	}
	return nil
}
