package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// requestID is a fresh id for one state-changing call. go-redis resends the
// same arguments when it retries, so the script recognises the repeat.
func requestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AcquireLease takes queue q's dispatcher lease for owner if nobody holds it.
// It returns the new fencing epoch, 0 when another owner holds the lease, or
// queue.ErrNotFound when q has no configuration (nothing to lead). It is
// AcquireLeases for one queue.
func (s *Store) AcquireLease(ctx context.Context, q, owner string, ttl time.Duration) (int64, error) {
	r := s.AcquireLeases(ctx, owner, []string{q}, ttl)[0]
	return r.Epoch, r.Err
}

// RenewLease extends owner's lease at epoch; false means it was lost. It is
// RenewLeases for one lease.
func (s *Store) RenewLease(ctx context.Context, q, owner string, epoch int64, ttl time.Duration) (bool, error) {
	r := s.RenewLeases(ctx, owner, []queue.Lease{{QueueID: q, Epoch: epoch}}, ttl)[0]
	return r.Epoch > 0, r.Err
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
// len(r.Grants) people are admitted. It fails with queue.ErrStaleEpoch,
// before any write, when r.Epoch is not the queue's current one. The tick
// carries a fresh id, so a retry of the same call is answered with the
// first call's result instead of admitting a second batch. It is IssueAll
// for one queue.
func (s *Store) Issue(ctx context.Context, q string, r queue.IssueRequest) (queue.IssueResult, error) {
	rep := s.IssueAll(ctx, []queue.IssueCall{{QueueID: q, IssueRequest: r}})[0]
	return rep.IssueResult, rep.Err
}

// issueArgs are the issue script's arguments for one tick of the line with
// keys k; tick is its id (Store.nextTick); cluster: the store is on a Redis
// Cluster, whose slots may move (the script reads per-user keys first).
func issueArgs(q string, line int, k Keys, r queue.IssueRequest, tick string, cluster bool) []any {
	args := make([]any, 0, 15+2*len(r.Grants))
	var rate, share any = "", ""
	if r.Rate > 0 {
		rate = strconv.FormatFloat(r.Rate, 'f', -1, 64)
	}
	if r.Share > 0 {
		share = strconv.FormatFloat(r.Share, 'f', -1, 64)
	}
	args = append(args, r.Epoch, k.Prefix(), r.Tick.Milliseconds(), q, tick,
		r.OutboxBound, rate, r.RateReason, share, r.TraceParent, r.TraceState, r.Heads, flag(r.History), orderPath(r.OrderPath), flag(cluster))
	for _, g := range r.Grants {
		args = append(args, queue.LineToken(line, g.Secret), queue.LineToken(line, g.TokenID))
	}
	return args
}

// issueReply decodes the issue script's reply (or its error).
func issueReply(q string, epoch int64, res []any, err error) (queue.IssueResult, error) {
	if err != nil {
		return queue.IssueResult{}, fmt.Errorf("issue %s: %w", q, classify(err))
	}
	if len(res) == 0 {
		return queue.IssueResult{}, fmt.Errorf("issue %s: empty reply", q)
	}
	var r queue.IssueResult
	if len(res) >= 10 {
		r.Rate = float(res[5])
		r.Mode = queue.AdmissionMode(str(res[6]))
		r.MinRate, r.MaxRate = float(res[7]), float(res[8])
		r.TargetLatency = time.Duration(intOf(res, 9)) * time.Millisecond
		r.ConfigVersion = intOf(res, 10)
	}
	if len(res) >= 13 {
		r.Interval = time.Duration(intOf(res, 11)) * time.Millisecond
		if tps, ok := res[12].([]any); ok {
			for _, tp := range tps {
				r.Traces = append(r.Traces, str(tp))
			}
		}
	}
	if len(res) >= 14 {
		r.HeadsRead, r.Heads = true, ints(res[13])
	}
	switch str(res[0]) {
	case "STALE":
		return queue.IssueResult{}, fmt.Errorf("issue %s at epoch %d: %w", q, epoch, queue.ErrStaleEpoch)
	case "NOT_FOUND":
		return queue.IssueResult{}, fmt.Errorf("issue %s: %w", q, queue.ErrNotFound)
	case "LATE":
		return queue.IssueResult{}, fmt.Errorf("issue %s: tick older than the last applied, %s: %w", q, str(res[1]), queue.ErrLate)
	case "GONE":
		return queue.IssueResult{Gone: true}, nil
	case "HELD":
		r.Held, r.Waiting = str(res[4]), intOf(res, 3)
	case "PAUSED":
		r.Paused, r.Expired, r.Waiting = true, int(intOf(res, 2)), intOf(res, 3)
	case "OK":
		r.Issued, r.Expired, r.Waiting = int(intOf(res, 1)), int(intOf(res, 2)), intOf(res, 3)
	default:
		return queue.IssueResult{}, fmt.Errorf("issue %s: unknown reply %v", q, res)
	}
	return r, nil
}

// Unregister takes q out of wr:queues if its keys are gone (a closed queue
// that finished, or an id whose configuration never existed), so no
// dispatcher serves it any more. It reports whether it removed q.
// wr:queues is in another slot than q's keys, so this cannot be one script;
// it is ordered instead: remove, then look at the configuration, and add the
// id back if a PUT created the queue again meanwhile (that PUT's own
// registration may have come before the removal).
func (s *Store) Unregister(ctx context.Context, q string) (bool, error) {
	n, err := s.rdb.SRem(ctx, QueuesKey, q).Result()
	if err != nil {
		return false, classifyf("unregister "+q, err)
	}
	exists, err := s.rdb.Exists(ctx, KeysFor(q).Config()).Result()
	if err != nil {
		return false, classifyf("unregister "+q, err)
	}
	if exists == 0 {
		return n == 1, nil
	}
	if n == 1 {
		return false, classifyf("unregister "+q, s.rdb.SAdd(ctx, QueuesKey, q).Err())
	}
	return false, nil
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

// orderPath is the issue script's ARGV 14: "<p95 ms>,<attempts>,<created>,
// <unavailable>,<outbox backlog>", or empty for none.
func orderPath(p *queue.OrderPath) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%d,%d,%d,%d,%d", p.P95.Milliseconds(), p.Attempts, p.Created, p.Unavailable, p.OutboxBacklog)
}

// onCluster reports whether the store talks to a Redis Cluster.
func (s *Store) onCluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// flag is a script's boolean argument: "1" or empty.
func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}
