package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// AcquireLease takes queue q's dispatcher lease for owner if nobody holds it.
// It returns the new fencing epoch, or 0 when another owner holds the lease.
func (s *Store) AcquireLease(ctx context.Context, q, owner string, ttl time.Duration) (int64, error) {
	epoch, err := leaseScript.Run(ctx, s.rdb, KeysFor(q).leaseKeys(), "acquire", owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("acquire lease %s: %w", q, classify(err))
	}
	return epoch, nil
}

// RenewLease extends owner's lease at epoch; false means it was lost.
func (s *Store) RenewLease(ctx context.Context, q, owner string, epoch int64, ttl time.Duration) (bool, error) {
	n, err := leaseScript.Run(ctx, s.rdb, KeysFor(q).leaseKeys(), "renew", owner, ttl.Milliseconds(), epoch).Int64()
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", q, classify(err))
	}
	return n == 1, nil
}

// ReleaseLease gives owner's lease up, so a standby takes over at its next
// attempt instead of after the lease runs out.
func (s *Store) ReleaseLease(ctx context.Context, q, owner string, epoch int64) error {
	if err := leaseScript.Run(ctx, s.rdb, KeysFor(q).leaseKeys(), "release", owner, 0, epoch).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", q, classify(err))
	}
	return nil
}

// Issue runs one leader tick on queue q (see lua/issue.lua): at most
// len(grants) people are admitted. It fails with queue.ErrStaleEpoch, before
// any write, when epoch is not the queue's current one.
func (s *Store) Issue(ctx context.Context, q string, epoch int64, tick time.Duration, grants []queue.Grant) (queue.IssueResult, error) {
	k := KeysFor(q)
	args := make([]any, 0, 4+2*len(grants))
	args = append(args, epoch, k.Prefix(), tick.Milliseconds(), q)
	for _, g := range grants {
		args = append(args, g.Secret, g.TokenID)
	}
	res, err := issueScript.Run(ctx, s.rdb, k.issueKeys(), args...).Slice()
	if err != nil {
		return queue.IssueResult{}, fmt.Errorf("issue %s: %w", q, classify(err))
	}
	switch str(res[0]) {
	case "STALE":
		return queue.IssueResult{}, fmt.Errorf("issue %s at epoch %d: %w", q, epoch, queue.ErrStaleEpoch)
	case "NOT_FOUND":
		return queue.IssueResult{}, fmt.Errorf("issue %s: %w", q, queue.ErrNotFound)
	case "PAUSED":
		return queue.IssueResult{Paused: true, Expired: int(intOf(res, 2))}, nil
	case "OK":
		return queue.IssueResult{Issued: int(intOf(res, 1)), Expired: int(intOf(res, 2)), Waiting: intOf(res, 3)}, nil
	}
	return queue.IssueResult{}, fmt.Errorf("issue %s: unknown reply %v", q, res)
}

func intOf(res []any, i int) int64 {
	if i >= len(res) {
		return 0
	}
	switch v := res[i].(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}
