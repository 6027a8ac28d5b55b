package redisstore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Optimistic transaction retries. Admin writes are rare; under a burst of
// them each round lets one writer through, so the bound is generous and the
// retries back off with jitter.
const maxUpdateAttempts = 100

// UpdateConfig reads queue q's knobs, lets update change them, and writes the
// result, all under WATCH so two operators changing knobs at once cannot
// lose each other's change. update receives the current config (the defaults
// when the queue does not exist yet) and whether it existed; an error from
// update aborts without writing. Creating a queue also registers it in
// wr:queues, where dispatchers find it.
//
// A queue split into lines gets its config copied to every line. A change
// of the line count of an existing queue first holds its lines (their
// scripts refuse for a moment, see holdLines) and goes through only if
// they are all empty; otherwise it fails with queue.ErrShardsFixed and changes
// nothing.
func (s *Store) UpdateConfig(ctx context.Context, q string, update func(cur queue.Config, exists bool) (queue.Config, error)) (queue.Config, bool, error) {
	return s.UpdateConfigBy(ctx, q, queue.Change{}, update)
}

// UpdateConfigBy is UpdateConfig on an operator's behalf: the write also
// appends a QueueChanged event naming them, the knobs before and after,
// to the queue's outbox in the same transaction, so every change written
// has its event and a refused one has none.
func (s *Store) UpdateConfigBy(ctx context.Context, q string, by queue.Change, update func(cur queue.Config, exists bool) (queue.Config, error)) (queue.Config, bool, error) {
	out, created, reshard, err := s.updateConfig(ctx, q, by, update, 0)
	if created {
		s.lines.forget(q) // a queue of this id deleted a moment ago had another key
	}
	if err == nil || reshard == nil {
		return out, created, s.afterConfig(ctx, q, out, 0, err)
	}
	// The line count changes: hold the lines, check they are empty, and
	// write the change only then.
	empty, err := s.holdLines(ctx, q, reshard.from)
	if err == nil && !empty {
		err = fmt.Errorf("configure %s: shards: %w", q, queue.ErrShardsFixed)
	}
	if err != nil {
		return out, false, errors.Join(err, s.releaseLines(ctx, q, reshard.from))
	}
	out, created, _, err = s.updateConfig(ctx, q, by, update, reshard.from)
	if err != nil {
		return out, false, errors.Join(err, s.releaseLines(ctx, q, reshard.from))
	}
	return out, created, s.afterConfig(ctx, q, out, reshard.from, nil)
}

// afterConfig completes a config write that err did not fail: the copies on
// the lines, and the lines a smaller count left behind (from, the count
// before a change of it; 0 when it did not change).
func (s *Store) afterConfig(ctx context.Context, q string, c queue.Config, from int, err error) error {
	if err != nil {
		return err
	}
	s.lines.noteShards(q, max(1, c.Shards))
	if c.Shards > 1 {
		if _, err := s.SyncLines(ctx, q); err != nil {
			return err
		}
	}
	if from > c.Shards {
		if err := s.dropLines(ctx, q, max(1, c.Shards), from); err != nil {
			return err
		}
	}
	if from > 0 {
		// Line 0's hold: the others lost theirs with their copies (or
		// with their keys).
		return s.releaseLines(ctx, q, 1)
	}
	return nil
}

// lineCountChange is a change of the line count update asked for.
type lineCountChange struct{ from, to int }

// errReshardFirst stops a transaction that would change the line count
// before the lines were held.
var errReshardFirst = errors.New("hold the lines first")

// updateConfig is one WATCH/MULTI round of UpdateConfig. held is the line
// count whose lines are held for a change of it (0: none): a change from
// any other count is returned as reshard, not written.
func (s *Store) updateConfig(ctx context.Context, q string, by queue.Change, update func(cur queue.Config, exists bool) (queue.Config, error), held int) (queue.Config, bool, *lineCountChange, error) {
	k := KeysFor(q)
	var (
		out       queue.Config
		created   bool
		updateErr error
		reshard   *lineCountChange
	)
	txf := func(tx *redis.Tx) error {
		h, err := tx.HGetAll(ctx, k.Config()).Result()
		if err != nil {
			return err
		}
		exists := len(h) > 0
		cur := queue.DefaultConfig()
		if exists {
			if cur, err = decodeConfig(h); err != nil {
				return fmt.Errorf("stored config of %s: %w", q, err)
			}
		}
		next, err := update(cur, exists)
		if err != nil {
			updateErr = err
			return err
		}
		if exists && next.Shards != cur.Shards && cur.Shards != held {
			reshard = &lineCountChange{from: cur.Shards, to: next.Shards}
			updateErr = errReshardFirst
			return updateErr
		}
		drawState, err := tx.HGet(ctx, k.Draw(), "state").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		started := drawState == string(queue.DrawDrawing) || drawState == string(queue.DrawDrawn)
		if started && !next.StartsAt.Equal(cur.StartsAt) {
			updateErr = fmt.Errorf("configure %s: startsAt: %w", q, queue.ErrStarted)
			return updateErr
		}
		// The line key is made once: with the queue, or for a queue made
		// before keys existed, while nobody is routed by it (one line) or
		// nobody is in its lines (held for a change of the count). A key
		// that appeared while people wait would move them to other lines.
		var lineKey string
		if h["lineKey"] == "" && (!exists || cur.Shards <= 1 || held > 0) {
			if lineKey, err = queue.NewLineKey(); err != nil {
				updateErr = err
				return err
			}
		}
		// The lines' key tags are chosen with the count: with the queue, or
		// while the lines are held empty for a change of it (tags.go).
		var lineTags *string
		if !exists || held > 0 {
			have, _ := parseLineTags(h[lineTagsField])
			kept := 0
			if exists {
				kept = min(cur.Shards, next.Shards) - 1
			}
			tags, err := s.chooseLineTags(ctx, q, next.Shards, kept, have)
			if err != nil {
				updateErr = err
				return err
			}
			lineTags = &tags
		}
		var seed, sha string
		if drawState == "" && !next.StartsAt.IsZero() {
			if seed, sha, err = queue.NewDrawSeed(); err != nil {
				updateErr = err
				return err
			}
		}
		var changed map[string]any
		if by != (queue.Change{}) {
			if changed, err = changeEvent(q, h, exists, cur, next, by); err != nil {
				updateErr = err
				return err
			}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if changed != nil {
				p.XAdd(ctx, &redis.XAddArgs{Stream: k.Outbox(), Values: changed})
			}
			if seed != "" {
				p.HSet(ctx, k.Draw(), "state", string(queue.DrawScheduled), "seed", seed, "seedSha256", sha)
				p.HSet(ctx, k.Config(), "drawPending", 1)
			}
			p.HSet(ctx, k.Config(), encodeConfig(next))
			p.HSet(ctx, k.Config(), "updatedAtMs", time.Now().UnixMilli())
			if lineKey != "" {
				p.HSet(ctx, k.Config(), "lineKey", lineKey)
			}
			switch {
			case lineTags == nil:
			case *lineTags == "":
				p.HDel(ctx, k.Config(), lineTagsField)
			default:
				p.HSet(ctx, k.Config(), lineTagsField, *lineTags)
			}
			if !exists {
				// The queue's generation: a ticket of a queue deleted and
				// re-created under the same id names the old one.
				p.HSet(ctx, k.Config(), "createdAtMs", time.Now().UnixMilli())
			}
			p.HIncrBy(ctx, k.Config(), "version", 1)
			if held > 0 {
				p.HDel(ctx, k.Config(), "resharding")
			}
			// The replicas' frontier caches read the queue again.
			p.Publish(ctx, FrontierChannel, q+" "+frontierChanged)
			return nil
		})
		out, created = next, !exists
		return err
	}
	for range maxUpdateAttempts {
		err := s.rdb.Watch(ctx, txf, k.Config(), k.Draw())
		if errors.Is(err, redis.TxFailedErr) {
			select {
			case <-ctx.Done():
				return out, false, nil, fmt.Errorf("configure %s: %w", q, ctx.Err())
			case <-time.After(time.Duration(1+rand.IntN(5)) * time.Millisecond):
			}
			continue
		}
		if updateErr != nil {
			return out, false, reshard, updateErr
		}
		if err != nil {
			return out, false, nil, fmt.Errorf("configure %s: %w", q, classify(err))
		}
		// wr:queues is in another slot, so it cannot join the transaction.
		// It is written after the configuration (and on every update, so an
		// interrupted create is completed by the next PUT): a refused update
		// registers nothing.
		if err := s.rdb.SAdd(ctx, QueuesKey, q).Err(); err != nil {
			return out, false, nil, fmt.Errorf("configure %s: %w", q, classify(err))
		}
		return out, created, nil, nil
	}
	return out, false, nil, fmt.Errorf("configure %s: %w: too much contention", q, queue.ErrUnavailable)
}

// Config returns queue q's knobs and live figures.
//
// A queue split into lines has its figures summed over the lines, each
// line's in Stats.Lines.
func (s *Store) Config(ctx context.Context, q string) (queue.Config, queue.Stats, error) {
	cfg, st, err := s.lineConfig(ctx, q, q)
	if err != nil || cfg.Shards <= 1 {
		return cfg, st, err
	}
	s.lines.noteShards(q, cfg.Shards)
	st.Lines = []queue.LineStats{lineStats(0, st)}
	_, _, tags, err := s.route(ctx, q)
	if err != nil {
		return cfg, st, err
	}
	for line := 1; line < cfg.Shards; line++ {
		_, ls, err := s.lineConfig(ctx, q, lineKeyID(q, line, tags))
		if errors.Is(err, queue.ErrNotFound) {
			continue // not copied yet (the leader copies it): nobody in it
		}
		if err != nil {
			return cfg, st, err
		}
		st.Lines = append(st.Lines, lineStats(line, ls))
		st.Waiting += ls.Waiting
		st.Active += ls.Active
		st.IssuedTotal += ls.IssuedTotal
		st.MeasuredRate += ls.MeasuredRate
		st.Presence = st.Presence.Add(ls.Presence)
		if ls.Draw != nil && st.Draw != nil {
			st.Draw.PreQueued += ls.Draw.PreQueued
			st.Draw.Placed += ls.Draw.Placed
		}
	}
	nodes, err := s.lineNodes(ctx, q, cfg.Shards, tags)
	if err != nil {
		return cfg, st, err
	}
	masters := map[string]bool{}
	for i := range st.Lines {
		if l := st.Lines[i].Line; l < len(nodes) {
			st.Lines[i].LineNode = nodes[l]
			masters[nodes[l].Node] = true
		}
	}
	if len(nodes) > 0 {
		st.LineMasters = len(masters)
	}
	return cfg, st, nil
}

func lineStats(line int, st queue.Stats) queue.LineStats {
	return queue.LineStats{Line: line, Waiting: st.Waiting, Active: st.Active, IssuedTotal: st.IssuedTotal,
		MeasuredRate: st.MeasuredRate, Held: st.Held}
}

// lineConfig reads the config and figures of one line (id) of queue q.
func (s *Store) lineConfig(ctx context.Context, q, id string) (queue.Config, queue.Stats, error) {
	res, err := statsScript.Run(ctx, s.rdb, KeysFor(id).statsKeys()).Slice()
	if err != nil {
		return queue.Config{}, queue.Stats{}, fmt.Errorf("config %s: %w", q, classify(err))
	}
	if len(res) == 1 {
		return queue.Config{}, queue.Stats{}, fmt.Errorf("config %s: %w", q, queue.ErrNotFound)
	}
	if len(res) != 12 {
		return queue.Config{}, queue.Stats{}, fmt.Errorf("config %s: bad stats reply (%d values)", q, len(res))
	}
	flat, _ := res[1].([]any)
	h := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		h[str(flat[i])] = str(flat[i+1])
	}
	cfg, err := decodeConfig(h)
	if err != nil {
		return cfg, queue.Stats{}, fmt.Errorf("config %s: %w", q, err)
	}
	st := queue.Stats{MeasuredRate: float(res[5]), Held: str(res[6]), EffectiveRate: float(res[8]), RateReason: str(res[9])}
	st.Waiting, _ = res[2].(int64)
	st.Active, _ = res[3].(int64)
	st.IssuedTotal, _ = strconv.ParseInt(str(res[4]), 10, 64)
	if p, _ := res[10].([]any); len(p) == 5 {
		st.Presence = queue.Presence{Away: intOf(p, 0), Skipped: intOf(p, 1), AwayTotal: intOf(p, 2),
			CameBackTotal: intOf(p, 3), AbandonedTotal: intOf(p, 4)}
	}
	if p := strings.Split(str(res[11]), ","); len(p) == 6 {
		n := make([]int64, 6)
		for i, v := range p {
			n[i], _ = strconv.ParseInt(v, 10, 64)
		}
		st.OrderPath = queue.OrderPath{P95: time.Duration(n[0]) * time.Millisecond, Attempts: n[1], Created: n[2], Unavailable: n[3],
			OutboxBacklog: n[4], At: time.UnixMilli(n[5]).UTC()}
	}
	if d, _ := res[7].([]any); len(d) == 7 {
		st.Draw = &queue.Draw{
			State: queue.DrawState(str(d[0])), SeedSHA256: str(d[1]), Seed: str(d[2]),
			PreQueued: intOf(d, 3), Placed: intOf(d, 4), StartedAt: msTime(d[5]), DrawnAt: msTime(d[6]),
		}
	}
	return cfg, st, nil
}

// Challenge reads queue q's enter challenge and its difficulty: one HMGET,
// cheap enough for every challenge request.
func (s *Store) Challenge(ctx context.Context, q string) (queue.EnterChallenge, int64, error) {
	v, err := s.rdb.HMGet(ctx, KeysFor(q).Config(), "state", "enterChallenge", "powDifficultyBits").Result()
	if err != nil {
		return "", 0, fmt.Errorf("challenge %s: %w", q, classify(err))
	}
	if v[0] == nil {
		return "", 0, fmt.Errorf("challenge %s: %w", q, queue.ErrNotFound)
	}
	def := queue.DefaultConfig()
	kind, bits := def.EnterChallenge, def.PowDifficultyBits
	if s, ok := v[1].(string); ok {
		kind = queue.EnterChallenge(s)
	}
	if s, ok := v[2].(string); ok {
		if bits, err = strconv.ParseInt(s, 10, 64); err != nil {
			return "", 0, fmt.Errorf("challenge %s: field powDifficultyBits: %w", q, err)
		}
	}
	return kind, bits, nil
}

func encodeConfig(c queue.Config) map[string]any {
	return map[string]any{
		"state":                  string(c.State),
		"admissionRatePerSec":    strconv.FormatFloat(c.AdmissionRatePerSec, 'f', -1, 64),
		"maxActive":              c.MaxActive,
		"maxQueueSize":           c.MaxQueueSize,
		"maxWaitSeconds":         c.MaxWaitSeconds,
		"tokenTtlSeconds":        c.TokenTTLSeconds,
		"activationSpreadMs":     c.ActivationSpreadMs,
		"enterChallenge":         string(c.EnterChallenge),
		"powDifficultyBits":      c.PowDifficultyBits,
		"maxOrdersPerUser":       c.MaxOrdersPerUser,
		"startsAtMs":             startsAtMs(c.StartsAt),
		"admissionMode":          string(c.AdmissionMode),
		"minAdmissionRatePerSec": strconv.FormatFloat(c.MinAdmissionRatePerSec, 'f', -1, 64),
		"maxAdmissionRatePerSec": strconv.FormatFloat(c.MaxAdmissionRatePerSec, 'f', -1, 64),
		"targetOrderLatencyMs":   c.TargetOrderLatencyMs,
		"failMode":               string(c.FailMode),
		"shards":                 max(1, c.Shards),
		"awayAfterSeconds":       c.AwayAfterSeconds,
		"awayGraceSeconds":       c.AwayGraceSeconds,
	}
}

func decodeConfig(h map[string]string) (queue.Config, error) {
	c := queue.DefaultConfig()
	c.State = queue.State(h["state"])
	var err error
	num := func(field string, dst *int64) {
		v, ok := h[field]
		if !ok || err != nil {
			return
		}
		if *dst, err = strconv.ParseInt(v, 10, 64); err != nil {
			err = fmt.Errorf("field %s: %w", field, err)
		}
	}
	if v, ok := h["admissionMode"]; ok {
		c.AdmissionMode = queue.AdmissionMode(v)
	}
	if v, ok := h["failMode"]; ok {
		c.FailMode = queue.FailMode(v)
	}
	flt := func(field string, dst *float64) {
		v, ok := h[field]
		if !ok || err != nil {
			return
		}
		if *dst, err = strconv.ParseFloat(v, 64); err != nil {
			err = fmt.Errorf("field %s: %w", field, err)
		}
	}
	flt("admissionRatePerSec", &c.AdmissionRatePerSec)
	flt("minAdmissionRatePerSec", &c.MinAdmissionRatePerSec)
	flt("maxAdmissionRatePerSec", &c.MaxAdmissionRatePerSec)
	num("maxActive", &c.MaxActive)
	num("maxQueueSize", &c.MaxQueueSize)
	num("maxWaitSeconds", &c.MaxWaitSeconds)
	num("tokenTtlSeconds", &c.TokenTTLSeconds)
	num("activationSpreadMs", &c.ActivationSpreadMs)
	num("powDifficultyBits", &c.PowDifficultyBits)
	num("maxOrdersPerUser", &c.MaxOrdersPerUser)
	num("targetOrderLatencyMs", &c.TargetOrderLatencyMs)
	num("awayAfterSeconds", &c.AwayAfterSeconds)
	num("awayGraceSeconds", &c.AwayGraceSeconds)
	shards := int64(1)
	num("shards", &shards)
	c.Shards = int(shards)
	var starts int64
	num("startsAtMs", &starts)
	if starts > 0 {
		c.StartsAt = time.UnixMilli(starts).UTC()
	}
	if v, ok := h["enterChallenge"]; ok {
		c.EnterChallenge = queue.EnterChallenge(v)
	}
	return c, err
}

func startsAtMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// changeEvent is the outbox entry of an operator's change of q from cur
// (h its stored hash; exists: the queue was there) to next. Its id names
// the queue's generation and the version the change makes, so it is the
// same however often the relay publishes it.
func changeEvent(q string, h map[string]string, exists bool, cur, next queue.Config, by queue.Change) (map[string]any, error) {
	// The knobs as they will read back (the hash keeps times to the
	// millisecond), so the ETag is the one a GET answers.
	stored := map[string]string{}
	for k, v := range encodeConfig(next) {
		stored[k] = fmt.Sprint(v)
	}
	if back, err := decodeConfig(stored); err == nil {
		next = back
	}
	after, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	born, before, created := h["createdAtMs"], "", "1"
	if exists {
		b, err := json.Marshal(cur)
		if err != nil {
			return nil, err
		}
		before, created = string(b), "0"
	}
	if born == "" {
		born = strconv.FormatInt(now, 10)
	}
	version, _ := strconv.ParseInt(h["version"], 10, 64)
	return map[string]any{
		"type": queue.EventQueueChanged, "eid": fmt.Sprintf("%s:%s:v%d.changed", q, born, version+1), "q": q,
		"at": now, "actor": by.Actor, "addr": by.Address, "before": before, "after": string(after),
		"etag": next.ETag(), "created": created, "outcome": queue.ChangeApplied,
	}, nil
}

// RefuseChange records that an operator's change of q was refused (reason:
// the problem type answered) in q's outbox, as a QueueChanged of outcome
// REFUSED, when q exists; it reports whether it did. Nothing else is
// written.
func (s *Store) RefuseChange(ctx context.Context, q string, by queue.Change, reason string) (bool, error) {
	id := make([]byte, 8)
	_, _ = crand.Read(id)
	k := KeysFor(q)
	asked := by.Asked
	if len(asked) > queue.MaxAsked || (asked != "" && !json.Valid([]byte(asked))) {
		asked = ""
	}
	fields := []any{"type", queue.EventQueueChanged, "eid", q + ":" + hex.EncodeToString(id) + ".refused", "q", q,
		"at", time.Now().UnixMilli(), "actor", by.Actor, "addr", by.Address, "created", "0",
		"outcome", queue.ChangeRefused, "refusal", reason}
	if by.Wording != "" {
		lang, _ := json.Marshal(by.Wording)
		texts := asked
		if texts == "" {
			texts = "null"
		}
		fields = append(fields, "worded", "1", "after", `{"lang":`+string(lang)+`,"texts":`+texts+`}`)
	} else {
		fields = append(fields, "after", asked)
	}
	n, err := refusedScript.Run(ctx, s.rdb, []string{k.Config(), k.Outbox()}, fields...).Int64()
	if err != nil {
		return false, fmt.Errorf("refused change %s: %w", q, classify(err))
	}
	return n == 1, nil
}
