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
	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// Consume takes user's entry token for queue q if secret matches it and it is
// active (see lua/consume.lua). Exactly one of many concurrent calls with the
// same token succeeds. The token moves to inflight with a lease; orderID
// ties the later settle or restore to this attempt.
func (s *Store) Consume(ctx context.Context, q, user, secret, orderID string, lease, slotGrace time.Duration) (queue.Consumed, error) {
	k, err := s.tokenKeys(ctx, q, secret)
	if err != nil {
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, err)
	}
	keys, args := k.consumeKeys(user),
		[]any{secret, user, orderID, lease.Milliseconds(), slotGrace.Milliseconds(), s.deadline(ctx), s.ackFlag()}
	var cmd *redis.Cmd
	if s.acking() {
		cmd = s.evalAcked(ctx, consumeScript, keys, args...)
	} else {
		cmd = consumeScript.Run(ctx, s.rdb, keys, args...) // its span names Consume
	}
	res, err := cmd.Slice()
	if errors.Is(err, queue.ErrNotReplicated) {
		// Taken on the primary, not confirmed: the caller gets what was
		// taken with the error, so it can hand the token back at once
		// instead of leaving it in flight until the lease runs out.
		if v, ok := cmd.Val().([]any); ok && len(v) > 0 && str(v[0]) == "OK" {
			return consumedOf(v), fmt.Errorf("consume %s: %w", q, err)
		}
	}
	if err != nil {
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, classify(err))
	}
	switch str(res[0]) {
	case "LATE":
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, queue.ErrLate)
	case "INVALID":
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, queue.ErrInvalidToken)
	case "NOT_ACTIVE":
		return queue.Consumed{}, fmt.Errorf("consume %s: %w", q, &queue.NotActiveError{Wait: time.Duration(intOf(res, 1)) * time.Millisecond})
	case "OK":
		return consumedOf(res), nil
	}
	return queue.Consumed{}, fmt.Errorf("consume %s: unknown reply %v", q, res)
}

// consumedOf reads consume's OK reply.
func consumedOf(res []any) queue.Consumed {
	return queue.Consumed{
		TokenID:    str(res[1]),
		ActivateAt: time.UnixMilli(intOf(res, 2)).UTC(),
		ExpiresAt:  time.UnixMilli(intOf(res, 3)).UTC(),
		MaxOrders:  intOf(res, 4),
	}
}

// CheckToken is the order path's cheap gate (see lua/check.lua): read-only,
// one round trip, nothing charged. Consume stays the authority.
func (s *Store) CheckToken(ctx context.Context, q, user, secret string) (queue.TokenCheck, error) {
	k, err := s.tokenKeys(ctx, q, secret)
	if err != nil {
		return queue.TokenCheck{}, fmt.Errorf("check token %s: %w", q, err)
	}
	res, err := checkScript.Run(ctx, s.rdb, k.checkKeys(user), secret).Slice()
	if err != nil {
		return queue.TokenCheck{}, fmt.Errorf("check token %s: %w", q, classify(err))
	}
	c := queue.TokenCheck{State: queue.TokenCheckState(str(res[0]))}
	switch c.State {
	case queue.TokenValid, queue.TokenSpent, queue.TokenInvalid:
	case queue.TokenNotActive:
		c.Wait = time.Duration(intOf(res, 1)) * time.Millisecond
	default:
		return queue.TokenCheck{}, fmt.Errorf("check token %s: unknown reply %v", q, res)
	}
	return c, nil
}

// Settle records that the order for this token was committed: slot freed,
// marker ORDERED. It reports false when there was nothing to settle (already
// settled or restored).
func (s *Store) Settle(ctx context.Context, q, user, tokenID, orderID string) (bool, error) {
	k, err := s.tokenKeys(ctx, q, tokenID)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", q, err)
	}
	n, err := settleScript.Run(ctx, s.rdb, k.settleKeys(user), user, tokenID, orderID).Int64()
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", q, classify(err))
	}
	return n == 1, nil
}

// Restore handles a failed order for this token (see lua/restore.lua).
func (s *Store) Restore(ctx context.Context, q, user, tokenID, orderID string, restorable bool) (queue.RestoreOutcome, error) {
	r := "0"
	if restorable {
		r = "1"
	}
	tp, ts := telemetry.Context(ctx)
	k, err := s.tokenKeys(ctx, q, tokenID)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", q, err)
	}
	keys, args := k.restoreKeys(user), []any{user, tokenID, orderID, r, q, tp, ts, s.ackFlag()}
	var cmd *redis.Cmd
	if s.acking() {
		cmd = s.evalAcked(ctx, restoreScript, keys, args...)
	} else {
		cmd = restoreScript.Run(ctx, s.rdb, keys, args...) // its span names Restore
	}
	res, err := cmd.Slice()
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", q, classify(err))
	}
	out := queue.RestoreOutcome(str(res[0]))
	switch out {
	case queue.Restored, queue.RestoreExpired, queue.Freed, queue.Duplicate:
		return out, nil
	}
	return "", fmt.Errorf("restore %s: unknown reply %v", q, res)
}

// Overdue lists up to limit tokens of q whose inflight lease has ended,
// oldest first, with the user and order each belongs to: the reaper's work
// list. "Ended" is judged by Redis TIME, the clock that set the deadlines,
// so a reaper whose own clock runs ahead cannot declare a live order
// abandoned. A token whose consumed data has expired comes back with its
// user but no order id.
//
// A queue split into lines has each line's list read, up to limit each.
func (s *Store) Overdue(ctx context.Context, q string, limit int64) ([]queue.InflightToken, error) {
	shards, err := s.Shards(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("overdue %s: %w", q, err)
	}
	var out []queue.InflightToken
	for line := range shards {
		k, err := s.lineKeys(ctx, q, line)
		if err != nil {
			return out, fmt.Errorf("overdue %s: %w", q, err)
		}
		res, err := overdueScript.Run(ctx, s.rdb, k.overdueKeys(), limit, k.Prefix()).Slice()
		if err != nil {
			return out, classifyf("overdue "+q, err)
		}
		out = appendOverdue(out, res)
	}
	return out, nil
}

// appendOverdue appends the tokens of an overdue script's reply to out.
func appendOverdue(out []queue.InflightToken, res []any) []queue.InflightToken {
	for i := 0; i+2 < len(res); i += 3 {
		tid, user, _ := strings.Cut(str(res[i]), ":")
		deadline, _ := strconv.ParseFloat(str(res[i+1]), 64)
		t := queue.InflightToken{TokenID: tid, UserID: user, Deadline: time.UnixMilli(int64(deadline)).UTC()}
		// tokenId|secret|activateAt|expiresAt|orderId|seq
		if f := strings.Split(str(res[i+2]), "|"); len(f) >= 5 && f[0] == tid {
			t.OrderID = f[4]
			if ms, err := strconv.ParseInt(f[3], 10, 64); err == nil {
				t.ExpiresAt = time.UnixMilli(ms).UTC()
			}
		}
		out = append(out, t)
	}
	return out
}

// classifyf wraps a Redis error with an operation name; nil stays nil.
func classifyf(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, classify(err))
}

// HandOff takes a failed attempt's token off the inflight lease list once its
// OrderFailed is safely recorded: from then on restoration owns it (the data
// a restore needs stays), and the reaper no longer looks at it.
func (s *Store) HandOff(ctx context.Context, q, user, tokenID string) error {
	k, err := s.tokenKeys(ctx, q, tokenID)
	if err != nil {
		return fmt.Errorf("hand off %s: %w", q, err)
	}
	return classifyf("hand off "+q, s.rdb.ZRem(ctx, k.Inflight(), inflightMember(tokenID, user)).Err())
}

// tokenKeys are the keys of the line of q that issued a token (its secret
// or id names the line: queue.TokenLine).
func (s *Store) tokenKeys(ctx context.Context, q, token string) (Keys, error) {
	return s.lineKeys(ctx, q, queue.TokenLine(token))
}
