package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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
func (s *Store) UpdateConfig(ctx context.Context, q string, update func(cur queue.Config, exists bool) (queue.Config, error)) (queue.Config, bool, error) {
	k := KeysFor(q)
	var (
		out       queue.Config
		created   bool
		updateErr error
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
		drawState, err := tx.HGet(ctx, k.Draw(), "state").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		started := drawState == string(queue.DrawDrawing) || drawState == string(queue.DrawDrawn)
		if started && !next.StartsAt.Equal(cur.StartsAt) {
			updateErr = fmt.Errorf("configure %s: startsAt: %w", q, queue.ErrStarted)
			return updateErr
		}
		var seed, sha string
		if drawState == "" && !next.StartsAt.IsZero() {
			if seed, sha, err = queue.NewDrawSeed(); err != nil {
				updateErr = err
				return err
			}
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if seed != "" {
				p.HSet(ctx, k.Draw(), "state", string(queue.DrawScheduled), "seed", seed, "seedSha256", sha)
				p.HSet(ctx, k.Config(), "drawPending", 1)
			}
			p.HSet(ctx, k.Config(), encodeConfig(next))
			p.HSet(ctx, k.Config(), "updatedAtMs", time.Now().UnixMilli())
			if !exists {
				// The queue's generation: a ticket of a queue deleted and
				// re-created under the same id names the old one.
				p.HSet(ctx, k.Config(), "createdAtMs", time.Now().UnixMilli())
			}
			p.HIncrBy(ctx, k.Config(), "version", 1)
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
				return out, false, fmt.Errorf("configure %s: %w", q, ctx.Err())
			case <-time.After(time.Duration(1+rand.IntN(5)) * time.Millisecond):
			}
			continue
		}
		if updateErr != nil {
			return out, false, updateErr
		}
		if err != nil {
			return out, false, fmt.Errorf("configure %s: %w", q, classify(err))
		}
		// wr:queues is in another slot, so it cannot join the transaction.
		// It is written after the configuration (and on every update, so an
		// interrupted create is completed by the next PUT): a refused update
		// registers nothing.
		if err := s.rdb.SAdd(ctx, QueuesKey, q).Err(); err != nil {
			return out, false, fmt.Errorf("configure %s: %w", q, classify(err))
		}
		return out, created, nil
	}
	return out, false, fmt.Errorf("configure %s: %w: too much contention", q, queue.ErrUnavailable)
}

// Config returns queue q's knobs and live figures.
func (s *Store) Config(ctx context.Context, q string) (queue.Config, queue.Stats, error) {
	res, err := statsScript.Run(ctx, s.rdb, KeysFor(q).statsKeys()).Slice()
	if err != nil {
		return queue.Config{}, queue.Stats{}, fmt.Errorf("config %s: %w", q, classify(err))
	}
	if len(res) == 1 {
		return queue.Config{}, queue.Stats{}, fmt.Errorf("config %s: %w", q, queue.ErrNotFound)
	}
	if len(res) != 10 {
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
