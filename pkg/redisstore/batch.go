package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// IssueAll runs one tick of each queue in calls (see Issue) in one
// pipelined round: a dispatcher leading hundreds of queues makes one round
// trip per tick, not one per queue, and holds one connection for it.
func (s *Store) IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply {
	out := make([]queue.IssueReply, len(calls))
	if len(calls) == 0 {
		return out
	}
	// The arguments are made once: a resend after NOSCRIPT carries the
	// same tick ids.
	keys, ok := s.keysOfLines(ctx, len(calls), func(i int) (string, int) { return calls[i].QueueID, calls[i].Line })
	args := make([][]any, len(calls))
	for _, i := range ok {
		c := calls[i]
		args[i] = issueArgs(c.QueueID, c.Line, keys[i].k, c.IssueRequest, s.nextTick(), s.onCluster())
	}
	for i := range calls {
		if keys[i].err != nil {
			out[i].Err = fmt.Errorf("issue %s: %w", calls[i].QueueID, keys[i].err)
		}
	}
	cmds, _ := s.evalAll(ctx, issueScript, len(ok),
		func(j int) []string { return keys[ok[j]].k.issueKeys() },
		func(j int) []any { return args[ok[j]] })
	for j, c := range cmds {
		i := ok[j]
		res, err := c.Slice()
		out[i].IssueResult, out[i].Err = issueReply(calls[i].QueueID, calls[i].Epoch, res, err)
	}
	return out
}

// AcquireLeases tries to take the lease of each queue in qs for owner (see
// AcquireLease), in one pipelined round.
func (s *Store) AcquireLeases(ctx context.Context, owner string, qs []string, ttl time.Duration) []queue.LeaseReply {
	out := make([]queue.LeaseReply, len(qs))
	if len(qs) == 0 {
		return out
	}
	attempts := make([]string, len(qs))
	for i := range attempts {
		attempts[i] = requestID()
	}
	late := s.deadline(ctx)
	cmds, confirmed, _ := s.evalRounds(ctx, leaseScript, len(qs),
		func(i int) []string { return KeysFor(qs[i]).leaseKeys() },
		func(i int) []any { return []any{"acquire", owner, ttl.Milliseconds(), attempts[i], late, s.ackFlag()} }, true)
	for i, c := range cmds {
		epoch, err := c.Int64()
		switch {
		case err == nil && epoch > 0 && !confirmed[i]:
			// Taken on the primary only: a failover could hand the same
			// epoch to another. Not led; the lease runs out by itself.
			out[i].Err = fmt.Errorf("acquire lease %s: %w", qs[i], queue.ErrNotReplicated)
		case err != nil:
			out[i].Err = fmt.Errorf("acquire lease %s: %w", qs[i], classify(err))
		case epoch == leaseLate:
			out[i].Err = fmt.Errorf("acquire lease %s: %w", qs[i], queue.ErrLate)
		case epoch < 0:
			out[i].Err = fmt.Errorf("acquire lease %s: %w", qs[i], queue.ErrNotFound)
		default:
			out[i].Epoch = epoch
		}
	}
	return out
}

// leaseLate is lease.lua's answer to an acquire or renew that reached Redis
// past its deadline.
const leaseLate = -2

// FollowLeases raises the epoch of each line (a queue's line 1 and up) to
// its queue leader's (see lua/lease.lua's follow), in one pipelined round.
// A reply's Epoch is the leader's when the line follows it, 0 when a newer
// leader took the line; queue.ErrNotFound is a line without its config
// copy (SyncLines writes it).
func (s *Store) FollowLeases(ctx context.Context, owner string, lines []queue.LineLease) []queue.LeaseReply {
	out := make([]queue.LeaseReply, len(lines))
	if len(lines) == 0 {
		return out
	}
	keys, ok := s.keysOfLines(ctx, len(lines), func(i int) (string, int) { return lines[i].QueueID, lines[i].Line })
	for i := range lines {
		if keys[i].err != nil {
			out[i].Err = fmt.Errorf("follow lease %s: %w", queue.LineID(lines[i].QueueID, lines[i].Line), keys[i].err)
		}
	}
	cmds, confirmed, _ := s.evalRounds(ctx, leaseScript, len(ok),
		func(j int) []string { return keys[ok[j]].k.leaseKeys() },
		func(j int) []any { return []any{"follow", owner, 0, lines[ok[j]].Epoch, 0, s.ackFlag()} }, true)
	for j, c := range cmds {
		i := ok[j]
		id := queue.LineID(lines[i].QueueID, lines[i].Line)
		n, err := c.Int64()
		switch {
		case err == nil && n > 0 && !confirmed[j]:
			out[i].Err = fmt.Errorf("follow lease %s: %w", id, queue.ErrNotReplicated)
		case err != nil:
			out[i].Err = fmt.Errorf("follow lease %s: %w", id, classify(err))
		case n < 0:
			out[i].Err = fmt.Errorf("follow lease %s: %w", id, queue.ErrNotFound)
		default:
			out[i].Epoch = n
		}
	}
	return out
}

// RenewLeases extends each of owner's leases (see RenewLease) in one
// pipelined round. A reply's Epoch is the lease's epoch while it is held,
// 0 when it was lost.
func (s *Store) RenewLeases(ctx context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply {
	out := make([]queue.LeaseReply, len(leases))
	if len(leases) == 0 {
		return out
	}
	late := s.deadline(ctx)
	cmds, _ := s.evalAll(ctx, leaseScript, len(leases),
		func(i int) []string { return KeysFor(leases[i].QueueID).leaseKeys() },
		func(i int) []any { return []any{"renew", owner, ttl.Milliseconds(), leases[i].Epoch, late} })
	for i, c := range cmds {
		n, err := c.Int64()
		switch {
		case err != nil:
			out[i].Err = fmt.Errorf("renew lease %s: %w", leases[i].QueueID, classify(err))
		case n == leaseLate:
			out[i].Err = fmt.Errorf("renew lease %s: %w", leases[i].QueueID, queue.ErrLate)
		case n == 1:
			out[i].Epoch = leases[i].Epoch
		}
	}
	return out
}
