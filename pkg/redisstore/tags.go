package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Line tags: on a Redis Cluster a line's keys are in the slot of their hash
// tag, so a queue split into lines spreads its load over the masters only
// if the tags' slots are on different masters. A tag "<q>:<i>" lands where
// its hash says: with three lines on three masters, one queue in nine had
// every line on one master. So when a queue's line count is set on a
// cluster (made with its lines, or changed while they are empty), each
// line i >= 1 is given a tag "<q>:<i>~<salt>", the salt the first whose
// slot is on the master the line is meant for: line 0 stays on its own
// slot (its tag is the queue id, which everything routes by), and lines
// 1.. go round the masters from the one after line 0's. The salts are
// stored in line 0's config (`lineTags`, comma-separated, line 1 first),
// read with the line count, and never change while the count does not:
// after the cluster's slots move, the queue's lines stay where the moved
// slots took them, and the queue reports where that is (LineStats.Node,
// Stats.LineNodes). A queue on one Redis, or made before tags, has none:
// its lines are "<q>:<i>".
//
// The tag is the keys' only: line ids ("<q>:<i>", queue.LineID) name a line
// in leases, events, announcements and logs as before, and the scripts
// take the line id from the tag without its salt.

// lineTagsField is line 0's config field with the line tags' salts.
const lineTagsField = "lineTags"

// maxTagSalt bounds the salts tried for one line; with M masters a salt
// misses a master with chance 1 - 1/M, so 4,096 tries miss with 64 masters
// once in about 10^28.
const maxTagSalt = 4096

// lineKeyID is the hash tag of line `line` of q's keys: q for line 0,
// "<q>:<i>" for a line without a tag, "<q>:<i>~<salt>" with one.
func lineKeyID(q string, line int, tags []string) string {
	if line == 0 {
		return q
	}
	id := queue.LineID(q, line)
	if line-1 < len(tags) && tags[line-1] != "" {
		return id + "~" + tags[line-1]
	}
	return id
}

// parseLineTags reads a config's lineTags ("" for none).
func parseLineTags(v string) ([]string, error) {
	if v == "" {
		return nil, nil
	}
	tags := strings.Split(v, ",")
	for _, t := range tags {
		if n, err := strconv.Atoi(t); t != "" && (err != nil || n < 1 || n > maxTagSalt || strconv.Itoa(n) != t) {
			return nil, fmt.Errorf("bad line tag %q in %q", t, v)
		}
	}
	return tags, nil
}

// LineKeys are the keys of line `line` of q as the Store routes them
// (tagged on a cluster): for the tests and tools that look at a line's
// keys.
func (s *Store) LineKeys(ctx context.Context, q string, line int) (Keys, error) {
	return s.lineKeys(ctx, q, line)
}

// lineKeys are the keys of line `line` of q, tagged as q's route says.
func (s *Store) lineKeys(ctx context.Context, q string, line int) (Keys, error) {
	if line == 0 {
		return KeysFor(q), nil
	}
	_, _, tags, err := s.route(ctx, q)
	if err != nil {
		return Keys{}, err
	}
	return KeysFor(lineKeyID(q, line, tags)), nil
}

// keysOf are the keys of the line with id id (queue.LineID): a queue's
// own for line 0.
func (s *Store) keysOf(ctx context.Context, id string) (Keys, error) {
	q, line, ok := queue.ParseLineID(id)
	if !ok || line == 0 {
		return KeysFor(id), nil
	}
	return s.lineKeys(ctx, q, line)
}

// storedLineTags reads q's line tags from its config, not the Store's
// book: for a change of the line count.
func (s *Store) storedLineTags(ctx context.Context, q string) ([]string, error) {
	v, err := s.rdb.HGet(ctx, KeysFor(q).Config(), lineTagsField).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("line tags of %s: %w", q, classify(err))
	}
	return parseLineTags(v)
}

// lineKeysOf is one line's keys, or why they are not known.
type lineKeysOf struct {
	k   Keys
	err error
}

// keysOfLines resolves the keys of n lines (at(i): queue id and line) and
// returns them with the indexes of those resolved, in order.
func (s *Store) keysOfLines(ctx context.Context, n int, at func(i int) (string, int)) ([]lineKeysOf, []int) {
	return resolveKeys(n, func(i int) (Keys, error) { q, line := at(i); return s.lineKeys(ctx, q, line) })
}

// keysOfIDs resolves the keys of line ids ids and returns them with the
// indexes of those resolved, in order.
func (s *Store) keysOfIDs(ctx context.Context, ids []string) ([]lineKeysOf, []int) {
	return resolveKeys(len(ids), func(i int) (Keys, error) { return s.keysOf(ctx, ids[i]) })
}

// resolveKeys is keys(i) for each of n, and the indexes of those resolved.
func resolveKeys(n int, keys func(i int) (Keys, error)) ([]lineKeysOf, []int) {
	out := make([]lineKeysOf, n)
	ok := make([]int, 0, n)
	for i := range n {
		if out[i].k, out[i].err = keys(i); out[i].err == nil {
			ok = append(ok, i)
		}
	}
	return out, ok
}

// keysOfAll is the keys of each line id of n (id(i)), or the first error
// that kept one from being known.
func (s *Store) keysOfAll(ctx context.Context, n int, id func(i int) string) ([]Keys, error) {
	keys := make([]Keys, n)
	for i := range n {
		k, err := s.keysOf(ctx, id(i))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id(i), err)
		}
		keys[i] = k
	}
	return keys, nil
}

// clusterSlots is a cluster's slot map: the master of each slot range,
// and the masters by address. nil on a Store over one Redis.
type clusterSlots struct {
	ranges  []redis.ClusterSlot
	masters []string // sorted
}

func (s *Store) clusterSlots(ctx context.Context) (*clusterSlots, error) {
	cc, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return nil, nil
	}
	return readClusterSlots(ctx, cc)
}

// slotBook keeps the slot map the lines' report read last, for a second:
// a console listing many queues split into lines reads it once.
type slotBook struct {
	mu sync.Mutex
	m  *clusterSlots
	at time.Time
}

// reportedSlots is the slot map for a report of where the lines are: at
// most a second old. Choosing the tags reads it afresh (clusterSlots).
func (s *Store) reportedSlots(ctx context.Context) (*clusterSlots, error) {
	s.slots.mu.Lock()
	m, at := s.slots.m, s.slots.at
	s.slots.mu.Unlock()
	if m != nil && time.Since(at) < time.Second {
		return m, nil
	}
	m, err := s.clusterSlots(ctx)
	if err != nil || m == nil {
		return m, err
	}
	s.slots.mu.Lock()
	s.slots.m, s.slots.at = m, time.Now()
	s.slots.mu.Unlock()
	return m, nil
}

func readClusterSlots(ctx context.Context, cc *redis.ClusterClient) (*clusterSlots, error) {
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster slots: %w", classify(err))
	}
	m := &clusterSlots{ranges: ranges}
	for _, r := range ranges {
		if len(r.Nodes) > 0 && !slices.Contains(m.masters, r.Nodes[0].Addr) {
			m.masters = append(m.masters, r.Nodes[0].Addr)
		}
	}
	slices.Sort(m.masters)
	return m, nil
}

// master is the address of the master serving slot ("" when none does).
func (m *clusterSlots) master(slot int64) string {
	for _, r := range m.ranges {
		if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr
		}
	}
	return ""
}

// keySlot is the cluster slot of hash tag tag, as the cluster computes it.
func keySlot(ctx context.Context, c redis.Cmdable, tag string) *redis.IntCmd {
	return c.ClusterKeySlot(ctx, "wr:{"+tag+"}:config")
}

// chooseLineTags picks the tags of lines 1..shards-1 of q on a cluster.
// The first kept lines keep the tags they have (have, "" for none): they
// are lines that stay when the count changes, and their keys must not
// move. Every other line goes to the next master round from line 0's. It
// returns "" for a Store over one Redis, and when no line has a tag.
func (s *Store) chooseLineTags(ctx context.Context, q string, shards, kept int, have []string) (string, error) {
	m, err := s.clusterSlots(ctx)
	if err != nil || m == nil || shards <= 1 || len(m.masters) == 0 {
		return "", err
	}
	cc := s.rdb.(*redis.ClusterClient)
	slot0, err := keySlot(ctx, cc, q).Result()
	if err != nil {
		return "", fmt.Errorf("line tags of %s: %w", q, classify(err))
	}
	first := max(slices.Index(m.masters, m.master(slot0)), 0)
	tags := make([]string, shards-1)
	for line := 1; line < shards; line++ {
		if line <= kept {
			if line-1 < len(have) {
				tags[line-1] = have[line-1]
			}
			continue
		}
		tag, err := s.tagOn(ctx, cc, m, q, line, m.masters[(first+line)%len(m.masters)])
		if err != nil {
			return "", err
		}
		tags[line-1] = tag
	}
	if strings.Trim(strings.Join(tags, ""), ",") == "" {
		return "", nil
	}
	return strings.Join(tags, ","), nil
}

// errNoTag: no salt up to maxTagSalt put a line's slot on its master.
var errNoTag = errors.New("no line tag lands on the master")

// tagOn finds the first salt whose tag for line of q is served by master
// want, asking the cluster for the slots of 64 salts a round trip.
func (s *Store) tagOn(ctx context.Context, cc *redis.ClusterClient, m *clusterSlots, q string, line int, want string) (string, error) {
	const batch = 64
	for from := 1; from <= maxTagSalt; from += batch {
		cmds := make([]*redis.IntCmd, batch)
		_, err := cc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = keySlot(ctx, p, queue.LineID(q, line)+"~"+strconv.Itoa(from+i))
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("line tags of %s: %w", q, classify(err))
		}
		for i, c := range cmds {
			if m.master(c.Val()) == want {
				return strconv.Itoa(from + i), nil
			}
		}
	}
	return "", fmt.Errorf("line tags of %s: line %d on %s: %w", q, line, want, errNoTag)
}

// lineNodes says, on a cluster, which master serves each of q's lines (by
// its keys' slot) and how many masters the lines are on; nothing on one
// Redis.
func (s *Store) lineNodes(ctx context.Context, q string, shards int, tags []string) ([]queue.LineNode, error) {
	m, err := s.reportedSlots(ctx)
	if err != nil || m == nil {
		return nil, err
	}
	cc := s.rdb.(*redis.ClusterClient)
	cmds := make([]*redis.IntCmd, shards)
	_, err = cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for line := range shards {
			cmds[line] = keySlot(ctx, p, lineKeyID(q, line, tags))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lines of %s: %w", q, classify(err))
	}
	nodes := make([]queue.LineNode, shards)
	for line, c := range cmds {
		nodes[line] = queue.LineNode{Slot: int(c.Val()), Node: m.master(c.Val()), Masters: len(m.masters)}
	}
	return nodes, nil
}
