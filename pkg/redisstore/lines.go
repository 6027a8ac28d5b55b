package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// A queue split into sub-lines (queue/lines.go) is served line by line: a
// person's enter, position and leave run on their line; the place a line
// answers is turned into the queue's with every line's length. The Store
// remembers, per queue, the line count and the line key (from the config;
// the scripts correct a stale count) and the lines' lengths, read in one
// pipelined round at most every lineFiguresMaxAge.

const (
	// lineCountMaxAge is how long a queue's line count is trusted before it
	// is read again. A stale count is never wrong for long: a line's
	// scripts refuse a caller that routed by another count (RESHARD).
	lineCountMaxAge = 5 * time.Second
	// lineFiguresMaxAge is how old the other lines' lengths may be when a
	// place in one line is turned into the queue's.
	lineFiguresMaxAge = 100 * time.Millisecond
	// maxLineBooks bounds the queues remembered; beyond it the book is
	// emptied (a queue is re-read at its next request).
	maxLineBooks = 10_000
)

// lineBook is what the Store remembers of the queues' lines.
type lineBook struct {
	mu     sync.Mutex
	queues map[string]*lineEntry
}

type lineEntry struct {
	shards int
	// key is the queue's line key (queue.LineOf). It is set once, when
	// the queue is created or its count changes while nobody is in it,
	// and never changes after: a count read with it routes right.
	key queue.LineKey
	// tags are the key tags of lines 1.. (lineKeyID), set with the count.
	tags     []string
	shardsAt time.Time
	// waiting is each line's length, read at figuresAt.
	waiting   []int64
	figuresAt time.Time
}

func (b *lineBook) entry(q string) *lineEntry {
	if b.queues == nil || len(b.queues) >= maxLineBooks {
		b.queues = map[string]*lineEntry{}
	}
	e := b.queues[q]
	if e == nil {
		e = &lineEntry{}
		b.queues[q] = e
	}
	return e
}

// setRoute records q's line count, key and line tags, as a config read
// told them.
func (b *lineBook) setRoute(q string, n int, key queue.LineKey, tags []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(q)
	if e.shards != n {
		e.waiting, e.figuresAt = nil, time.Time{}
	}
	e.shards, e.key, e.tags, e.shardsAt = n, key, tags, time.Now()
}

// forget drops what the book knows of q's routing: a script said the
// count changed, and a change of the count may come with a key (a queue
// split before keys existed gets one then), so both are read again.
func (b *lineBook) forget(q string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.queues[q]; e != nil {
		e.shards, e.key, e.tags, e.shardsAt, e.waiting, e.figuresAt = 0, nil, nil, time.Time{}, nil, time.Time{}
	}
}

// noteShards is told q's line count by a config read or write, or by a
// script that refused a stale one: a count other than the book's is read
// again with the key at the next request.
func (b *lineBook) noteShards(q string, n int) {
	b.mu.Lock()
	e := b.queues[q]
	stale := e != nil && e.shards != n
	b.mu.Unlock()
	if stale {
		b.forget(q)
	}
}

// Shards is queue q's line count (1 for a queue not split, or one without
// a config: its scripts say NOT_FOUND).
func (s *Store) Shards(ctx context.Context, q string) (int, error) {
	n, _, _, err := s.route(ctx, q)
	return n, err
}

// route is queue q's line count, line key and line tags, from the book or
// the config.
func (s *Store) route(ctx context.Context, q string) (int, queue.LineKey, []string, error) {
	s.lines.mu.Lock()
	e := s.lines.entry(q)
	n, key, tags, at := e.shards, e.key, e.tags, e.shardsAt
	s.lines.mu.Unlock()
	if n > 0 && time.Since(at) < lineCountMaxAge {
		return n, key, tags, nil
	}
	v, err := s.rdb.HMGet(ctx, KeysFor(q).Config(), "shards", "lineKey", lineTagsField).Result()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("lines of %s: %w", q, classify(err))
	}
	n = 1
	if f := str(v[0]); f != "" {
		if n, err = strconv.Atoi(f); err != nil || n < 1 || n > queue.MaxShards {
			return 0, nil, nil, fmt.Errorf("lines of %s: bad shards %q", q, f)
		}
	}
	if key, err = queue.ParseLineKey(str(v[1])); err != nil {
		return 0, nil, nil, fmt.Errorf("lines of %s: %w", q, err)
	}
	if tags, err = parseLineTags(str(v[2])); err != nil {
		return 0, nil, nil, fmt.Errorf("lines of %s: %w", q, err)
	}
	s.lines.setRoute(q, n, key, tags)
	return n, key, tags, nil
}

// userLine is the line of user in q, by the line count and key the Store
// has.
func (s *Store) userLine(ctx context.Context, q, user string) (line, shards int, err error) {
	shards, key, _, err := s.route(ctx, q)
	if err != nil {
		return 0, 0, err
	}
	return queue.LineOf(key, user, shards), shards, nil
}

// LineOf is the line of user in queue q, as enter, position and leave
// route them.
func (s *Store) LineOf(ctx context.Context, q, user string) (int, error) {
	line, _, err := s.userLine(ctx, q, user)
	return line, err
}

// reshard reads a line script's reply that refused the caller's line count:
// true when the count was stale (recorded; route again), or the error to
// return while an operator changes it.
func (s *Store) reshard(q string, res []any) (bool, error) {
	if len(res) == 0 {
		return false, nil
	}
	switch str(res[0]) {
	case "RESHARD":
		s.lines.forget(q)
		return true, nil
	case "RESHARDING":
		return false, fmt.Errorf("%s: its line count is being changed: %w", q, queue.ErrUnavailable)
	}
	return false, nil
}

// lineRun runs a line script for user in q: on the user's line, by the line
// count the Store has, once more if that count was stale.
func (s *Store) lineRun(ctx context.Context, q, user string, run func(line, shards int) ([]any, error)) ([]any, int, int, error) {
	for attempt := 0; ; attempt++ {
		line, shards, err := s.userLine(ctx, q, user)
		if err != nil {
			return nil, 0, 0, err
		}
		res, err := run(line, shards)
		if err != nil {
			return nil, 0, 0, err
		}
		again, err := s.reshard(q, res)
		if err != nil {
			return nil, 0, 0, err
		}
		if !again || attempt == 1 {
			if again {
				return nil, 0, 0, fmt.Errorf("%s: line count changed twice: %w", q, queue.ErrUnavailable)
			}
			return res, line, shards, nil
		}
	}
}

// lineLengths is every line's length for q, read at most lineFiguresMaxAge
// ago, and while line's length (lineNow) is within a tenth of what that
// read found: a queue filling or draining fast is read again sooner, so the
// extrapolation of queueLength stays short. A line of fewer than ten people
// is read again whenever it moved: scaling the others by 2/1 or 3/2 would
// double or halve the queue (with the lines' lengths of 100 ms ago
// extrapolated, 9 people entering one after another were told a queue of
// 16).
func (s *Store) lineLengths(ctx context.Context, q string, shards, line int, lineNow int64) ([]int64, error) {
	s.lines.mu.Lock()
	e := s.lines.entry(q)
	var waiting []int64
	if len(e.waiting) == shards && time.Since(e.figuresAt) < lineFiguresMaxAge {
		if then := e.waiting[line]; abs(lineNow-then) <= then/10 {
			waiting = append([]int64(nil), e.waiting...)
		}
	}
	s.lines.mu.Unlock()
	if waiting == nil {
		read, err := s.readLineLengths(ctx, q, shards)
		if err != nil {
			return nil, err
		}
		s.lines.mu.Lock()
		if e := s.lines.entry(q); e.shards == shards {
			e.waiting, e.figuresAt = read, time.Now()
		}
		s.lines.mu.Unlock()
		waiting = read
	}
	return waiting, nil
}

// readLineLengths reads every line's length in one pipelined round (one
// round trip per master).
func (s *Store) readLineLengths(ctx context.Context, q string, shards int) ([]int64, error) {
	_, _, tags, err := s.route(ctx, q)
	if err != nil {
		return nil, err
	}
	lens := make([]*redis.IntCmd, shards)
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range shards {
			lens[i] = p.ZCard(ctx, KeysFor(lineKeyID(q, i, tags)).Waiting())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lines of %s: %w", q, classify(err))
	}
	waiting := make([]int64, shards)
	for i := range shards {
		waiting[i] = lens[i].Val()
	}
	return waiting, nil
}

// queueLength is the queue's length from its lines' lengths read a moment
// ago (waiting) and line's length now (lineNow). The lines fill and drain
// together (people are spread over them by a hash, admitted in proportion),
// so the others are taken to have grown or shrunk as line did since:
// during a rush of enters their lengths of 100 ms ago would undercount.
func queueLength(waiting []int64, line int, lineNow int64) int64 {
	var then int64
	for _, w := range waiting {
		then += w
	}
	if w := waiting[line]; w > 0 {
		return max(lineNow, int64(math.Round(float64(then)*float64(lineNow)/float64(w))))
	}
	return then - waiting[line] + lineNow
}

// toQueue turns a standing read from one line of q into the queue's: the
// place among everyone waiting (queue.ScaleToQueue) and the queue's
// length. The line is admitted at its share of the queue's rate, its
// length over the queue's, so the queue's measured rate is the line's
// scaled by the same factor (and the wait is the line's own estimate).
func (s *Store) toQueue(ctx context.Context, q string, shards, line int, st queue.Standing) (queue.Standing, error) {
	st.QueueID = q
	if shards <= 1 {
		return st, nil // Line and Lines stay 0: not split
	}
	st.Line, st.Lines = line, shards
	waiting, err := s.lineLengths(ctx, q, shards, line, st.Total)
	if err != nil {
		return st, err
	}
	return st.InQueue(st.Total, queueLength(waiting, line, st.Total)), nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
