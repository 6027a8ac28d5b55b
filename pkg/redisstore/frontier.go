package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// FrontierChannel is where the issue script announces a queue's moved
// admission frontier: "<queue> <last seq> <leavers above it in its fine
// bin> <waiting>"; the scripts that count leavers announce them, "<queue>
// left <count>"; a configuration change or a close is "<queue> changed"
// (classic pub/sub: on a cluster every node's subscribers hear it).
const FrontierChannel = "wr:frontier"

// The second word of a leave's and of a configuration change's
// announcement.
const (
	frontierLeft    = "left"
	frontierChanged = "changed"
)

// frontierLeftShare is the share of a line's people who may have left
// unknown to a cache before it reads the line again: a tenth of a percent,
// about what a read every 100 ms left unknown at 200 leaves a second in a
// line of 20,000 (with a half percent, a place 162 was told 2 off).
const frontierLeftShare = 0.001

// What a frontier read covers: the fine bins reach at least this many
// sequence numbers past the frontier (the coarse bins' interpolation is
// within 1 % from there on), and at most this many coarse bins are read (4
// million places; the rest is spread evenly).
const (
	frontierFineWindow = 4096
	frontierMaxCoarse  = 4096
)

// Frontiers reads the frontier of each of qs in one pipelined round (on a
// cluster, one per node). A queue without configuration is absent from the
// map; a queue whose read failed too, unless every read failed: then the
// error.
func (s *Store) Frontiers(ctx context.Context, qs []string) (map[string]*queue.Frontier, error) {
	out := make(map[string]*queue.Frontier, len(qs))
	if len(qs) == 0 {
		return out, nil
	}
	keys, ok := s.keysOfIDs(ctx, qs)
	cmds, err := s.evalAll(ctx, frontierScript, len(ok),
		func(j int) []string { return keys[ok[j]].k.frontierKeys() },
		func(int) []any { return []any{frontierFineWindow, frontierMaxCoarse} })
	for j, c := range cmds {
		q := qs[ok[j]]
		res, cerr := c.Slice()
		if cerr != nil {
			continue
		}
		if f, ferr := frontierReply(q, res); ferr == nil {
			out[q] = f
		}
	}
	if err == nil && len(ok) < len(qs) {
		err = keys[slices.IndexFunc(keys, func(k lineKeysOf) bool { return k.err != nil })].err
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("frontiers: %w", classify(err))
	}
	return out, nil
}

// frontierReply decodes lua/frontier.lua's reply.
func frontierReply(q string, res []any) (*queue.Frontier, error) {
	if len(res) == 0 || str(res[0]) == "NOT_FOUND" {
		return nil, queue.ErrNotFound
	}
	if len(res) < 17 {
		return nil, fmt.Errorf("frontier %s: short reply (%d values)", q, len(res))
	}
	f := &queue.Frontier{
		QueueID:        q,
		QueueState:     queue.State(str(res[1])),
		ConfiguredRate: float(res[2]),
		MeasuredRate:   float(res[3]),
		LeaveShare:     float(res[4]),
		Generation:     intOf(res, 6),
		Last:           intOf(res, 7),
		Tail:           intOf(res, 8),
		Waiting:        intOf(res, 9),
		FirstLeft:      intOf(res, 10),
		FineFrom:       intOf(res, 11),
		Fine:           ints(res[12]),
		CoarseFrom:     intOf(res, 13),
		Coarse:         ints(res[14]),
		Beyond:         intOf(res, 15),
		Usable:         intOf(res, 16) == 1,
		Shards:         int(max(1, intOf(res, 17))),
	}
	if ms := intOf(res, 5); ms > 0 {
		f.StartsAt = time.UnixMilli(ms).UTC()
	}
	if len(res) >= 19 {
		key, err := queue.ParseLineKey(str(res[18]))
		if err != nil {
			return nil, fmt.Errorf("frontier %s: %w", q, err)
		}
		f.LineKey = key
	}
	return f.Index(), nil
}

func ints(v any) []int64 {
	list, _ := v.([]any)
	out := make([]int64, len(list))
	for i := range list {
		out[i] = intOf(list, i)
	}
	return out
}

// FrontierCache keeps the frontier of every queue a replica was recently
// asked about, so a poll with a ticket far from the front is answered from
// memory. Its frontier is moved the moment a tick admits, from
// FrontierChannel, which costs Redis nothing per poll; the rest (the
// leaver bins, the tail, the state) is read again, one script per queue
// and all due queues in one pipelined round, when the read is Fresh old,
// or PollsPerRead lookups have been answered from it, or its configuration
// changed, or more than a tenth of a percent of its people left (both
// announced), whichever comes first. So a queue costs Redis at
// most one read per PollsPerRead polls, or one per Fresh when it is polled
// less than that. A queue is tracked from its first lookup until nobody
// asked about it for a while; a frontier whose last read is older than
// MaxAge (Redis has not answered) is not used.
type FrontierCache struct {
	s   *Store
	o   FrontierOptions
	log *slog.Logger

	mu     sync.RWMutex
	queues map[string]*frontierEntry
}

// FrontierOptions tune a FrontierCache; zero values take the defaults.
type FrontierOptions struct {
	// Every is how often due queues are read (default and at most 100 ms):
	// no queue is read more often.
	Every time.Duration
	// Fresh is how old a polled queue's read may get before it is read
	// again (default 1.5 s).
	Fresh time.Duration
	// PollsPerRead is how many lookups a read answers at most before the
	// queue is read again (default 200: 0.005 Redis calls a poll).
	PollsPerRead int64
	// MaxAge is how old a frontier's read may be and still answer
	// (default 3 s, twice Fresh): a read that does not come back (Redis
	// slow or gone) sends the polls to Redis from then on.
	MaxAge time.Duration
	// Idle drops a queue nobody asked about for this long (default 30 s).
	Idle time.Duration
	// MaxQueues bounds the queues tracked (default 10,000); a queue
	// beyond it is answered from Redis.
	MaxQueues int
	// Observe, when set, is told the outcome of every read round: how
	// many queues it read and its error.
	Observe func(queues int, d time.Duration, err error)
}

func (o *FrontierOptions) defaults() {
	if o.Every <= 0 || o.Every > 100*time.Millisecond {
		o.Every = 100 * time.Millisecond
	}
	if o.Fresh <= 0 {
		o.Fresh = 1500 * time.Millisecond
	}
	if o.PollsPerRead <= 0 {
		o.PollsPerRead = 200
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 2 * o.Fresh
	}
	if o.Idle <= 0 {
		o.Idle = 30 * time.Second
	}
	if o.MaxQueues <= 0 {
		o.MaxQueues = 10_000
	}
}

type frontierEntry struct {
	f       atomic.Pointer[queue.Frontier]
	fetched atomic.Int64 // unix nanoseconds of the read that built f
	used    atomic.Int64 // unix nanoseconds of the last lookup
	asked   atomic.Int64 // lookups answered since the read that built f
	changes atomic.Int64 // configuration changes announced since that read
	left    atomic.Int64 // leavers announced since that read
}

// NewFrontierCache returns a cache over s; Run keeps it fresh.
func NewFrontierCache(s *Store, log *slog.Logger, o FrontierOptions) *FrontierCache {
	o.defaults()
	if log == nil {
		log = slog.Default()
	}
	return &FrontierCache{s: s, o: o, log: log, queues: map[string]*frontierEntry{}}
}

// Lookup returns q's frontier, or nil when there is none fresh enough (q
// is then tracked from now on, and the caller asks Redis).
func (c *FrontierCache) Lookup(q string) *queue.Frontier {
	now := time.Now().UnixNano()
	c.mu.RLock()
	e := c.queues[q]
	c.mu.RUnlock()
	if e == nil {
		c.mu.Lock()
		if e = c.queues[q]; e == nil && len(c.queues) < c.o.MaxQueues {
			e = &frontierEntry{}
			c.queues[q] = e
		}
		c.mu.Unlock()
		if e == nil {
			return nil
		}
	}
	e.used.Store(now)
	f := e.f.Load()
	if f == nil || now-e.fetched.Load() > int64(c.o.MaxAge) {
		return nil
	}
	e.asked.Add(1)
	return f
}

// Run keeps the tracked queues' frontiers fresh until ctx ends: the read
// every interval, and the admission announcements in between.
func (c *FrontierCache) Run(ctx context.Context) error {
	ps := c.s.rdb.Subscribe(ctx, FrontierChannel)
	// The reader ends when the closed subscription closes its channel;
	// Run returns after it.
	var reader sync.WaitGroup
	defer reader.Wait()
	defer ps.Close()
	msgs := ps.Channel(redis.WithChannelHealthCheckInterval(5 * time.Second))
	reader.Go(func() {
		for m := range msgs {
			c.announced(m.Payload)
		}
	})
	t := time.NewTicker(c.o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		c.refresh(ctx, false)
	}
}

// Refresh reads every tracked queue's frontier now, and stops tracking the
// queues nobody asked about lately.
func (c *FrontierCache) Refresh(ctx context.Context) { c.refresh(ctx, true) }

// due reports whether e is to be read in a round at now: never read, read
// Fresh ago, PollsPerRead lookups answered, its configuration changed, or
// more of its people left than frontierLeftShare.
func (c *FrontierCache) due(e *frontierEntry, now int64) bool {
	f := e.f.Load()
	return f == nil || now-e.fetched.Load() >= int64(c.o.Fresh) ||
		e.asked.Load() >= c.o.PollsPerRead || e.changes.Load() > 0 ||
		float64(e.left.Load()) > max(1, frontierLeftShare*float64(f.Waiting))
}

// refresh reads the due queues' frontiers (all, when all), and stops
// tracking the queues nobody asked about lately.
func (c *FrontierCache) refresh(ctx context.Context, all bool) {
	now := time.Now()
	c.mu.Lock()
	qs := make([]string, 0, len(c.queues))
	// What each read answers for: the lookups, changes and leavers so far.
	asked, changes, left := make([]int64, 0, len(c.queues)), make([]int64, 0, len(c.queues)), make([]int64, 0, len(c.queues))
	for q, e := range c.queues {
		if now.UnixNano()-e.used.Load() > int64(c.o.Idle) {
			delete(c.queues, q)
			continue
		}
		if all || c.due(e, now.UnixNano()) {
			qs = append(qs, q)
			asked, changes, left = append(asked, e.asked.Load()), append(changes, e.changes.Load()), append(left, e.left.Load())
		}
	}
	c.mu.Unlock()
	if len(qs) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, c.o.MaxAge)
	defer cancel()
	fs, err := c.s.Frontiers(rctx, qs)
	if c.o.Observe != nil {
		c.o.Observe(len(qs), time.Since(now), err)
	}
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			c.log.Debug("frontier read", "queues", len(qs), "err", err)
		}
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, q := range qs {
		f, e := fs[q], c.queues[q]
		if f == nil || e == nil {
			continue
		}
		e.asked.Add(-asked[i])
		e.changes.Add(-changes[i])
		e.left.Add(-left[i])
		if old := e.f.Load(); old != nil && old.Generation == f.Generation && old.Last > f.Last {
			// A tick announced while this read was on its way.
			f.Last, f.FirstLeft, f.Waiting = old.Last, old.FirstLeft, old.Waiting
		}
		e.f.Store(f)
		e.fetched.Store(now.UnixNano())
	}
}

// announced moves a tracked queue's frontier as a tick announced it, or
// has a queue whose configuration changed read in the next round. An
// announcement older than what the cache has (a read that came after it)
// changes nothing.
func (c *FrontierCache) announced(payload string) {
	parts := strings.Fields(payload)
	switch {
	case len(parts) == 2 && parts[1] == frontierChanged:
		if e := c.entry(parts[0]); e != nil {
			e.changes.Add(1)
		}
		return
	case len(parts) == 3 && parts[1] == frontierLeft:
		n, err := strconv.ParseInt(parts[2], 10, 64)
		if e := c.entry(parts[0]); e != nil && err == nil && n > 0 {
			e.left.Add(n)
		}
		return
	}
	if len(parts) != 4 {
		return
	}
	var n [3]int64
	for i := range n {
		v, err := strconv.ParseInt(parts[i+1], 10, 64)
		if err != nil {
			return
		}
		n[i] = v
	}
	e := c.entry(parts[0])
	if e == nil {
		return
	}
	for {
		old := e.f.Load()
		if old == nil || n[0] <= old.Last {
			return
		}
		next := *old
		next.Last, next.FirstLeft, next.Waiting = n[0], n[1], n[2]
		if e.f.CompareAndSwap(old, &next) {
			return
		}
	}
}

// entry is q's entry, nil when q is not tracked.
func (c *FrontierCache) entry(q string) *frontierEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.queues[q]
}
