package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/queue"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/testenv"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// recorder is a Publisher that keeps every event, as a broker consumer would
// see them.
type recorder struct {
	mu     sync.Mutex
	events []queue.Event
	fail   atomic.Bool
	queue  string // when set, of() reports only this queue's events
}

func (r *recorder) Publish(_ context.Context, events []queue.Event) error {
	if r.fail.Load() {
		return errors.New("broker down")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, events...)
	return nil
}

// of returns the recorded events of one type, in publish order.
func (r *recorder) of(typ string) []queue.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []queue.Event
	for _, e := range r.events {
		if e.Type == typ && (r.queue == "" || e.QueueID == r.queue) {
			out = append(out, e)
		}
	}
	return out
}

// crashable wraps a Store; once crashed every call fails, like a process
// that died: it neither renews nor releases its lease.
type crashable struct {
	*redisstore.Store
	crashed     atomic.Bool
	placeBudget atomic.Int32
}

var errCrashed = errors.New("process is dead")

func (c *crashable) AcquireLeases(ctx context.Context, owner string, qs []string, ttl time.Duration) []queue.LeaseReply {
	if c.crashed.Load() {
		return failedLeases(len(qs))
	}
	return c.Store.AcquireLeases(ctx, owner, qs, ttl)
}

func (c *crashable) RenewLeases(ctx context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply {
	if c.crashed.Load() {
		return failedLeases(len(leases))
	}
	return c.Store.RenewLeases(ctx, owner, leases, ttl)
}

func failedLeases(n int) []queue.LeaseReply {
	out := make([]queue.LeaseReply, n)
	for i := range out {
		out[i].Err = errCrashed
	}
	return out
}

func (c *crashable) ReleaseLease(ctx context.Context, q, owner string, epoch int64) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.Store.ReleaseLease(ctx, q, owner, epoch)
}

func (c *crashable) IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply {
	if c.crashed.Load() {
		out := make([]queue.IssueReply, len(calls))
		for i := range out {
			out[i].Err = errCrashed
		}
		return out
	}
	return c.Store.IssueAll(ctx, calls)
}

func (c *crashable) SyncLines(ctx context.Context, q string) (int, error) {
	if c.crashed.Load() {
		return 0, errCrashed
	}
	return c.Store.SyncLines(ctx, q)
}

func (c *crashable) FollowLeases(ctx context.Context, owner string, lines []queue.LineLease) []queue.LeaseReply {
	if c.crashed.Load() {
		return failedLeases(len(lines))
	}
	return c.Store.FollowLeases(ctx, owner, lines)
}

func (c *crashable) ReadOutboxes(ctx context.Context, consumer string, n int64, reads []queue.OutboxRead) ([]queue.OutboxBatch, error) {
	if c.crashed.Load() {
		return nil, errCrashed
	}
	return c.Store.ReadOutboxes(ctx, consumer, n, reads)
}

// crashAfterPlacing makes the process die right after its n-th successful
// place call of a draw (0: never).
func (c *crashable) crashAfterPlacing(n int32) { c.placeBudget.Store(n) }

func (c *crashable) StartDraw(ctx context.Context, q string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error) {
	if c.crashed.Load() {
		return queue.DrawWork{}, errCrashed
	}
	return c.Store.StartDraw(ctx, q, epoch, t)
}

func (c *crashable) PlaceDrawn(ctx context.Context, q string, epoch int64, users []string) (queue.DrawWork, error) {
	if c.crashed.Load() {
		return queue.DrawWork{}, errCrashed
	}
	w, err := c.Store.PlaceDrawn(ctx, q, epoch, users)
	if err == nil && c.placeBudget.Load() > 0 && c.placeBudget.Add(-1) == 0 {
		c.crashed.Store(true)
	}
	return w, err
}

func (c *crashable) FinishDraw(ctx context.Context, q string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error) {
	if c.crashed.Load() {
		return queue.DrawWork{}, errCrashed
	}
	return c.Store.FinishDraw(ctx, q, epoch, t)
}

// replica is one dispatcher process.
type replica struct {
	d      *dispatch.Dispatcher
	owner  string
	store  *crashable
	cancel context.CancelFunc
	done   chan struct{}
}

type cluster struct {
	t        *testing.T
	rdb      redis.UniversalClient
	store    *redisstore.Store
	pub      *recorder
	opts     dispatch.Options
	replicas []*replica
	// metrics, when set, is every replica's (nil: none).
	metrics dispatch.Metrics
	// warns counts every replica's log records at warn and above.
	warns *warnings
}

func newCluster(t *testing.T, opts dispatch.Options) *cluster {
	rdb := testenv.Redis(t)
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, rdb: rdb, store: s, pub: &recorder{}, opts: opts, warns: &warnings{n: map[string]int{}}}
}

// start runs n more dispatcher replicas; each is stopped at test cleanup.
func (c *cluster) start(n int) {
	for range n {
		o := c.opts
		o.Owner = testenv.ID(c.t)
		r := &replica{owner: o.Owner, store: &crashable{Store: c.store}, done: make(chan struct{})}
		var err error
		r.d, err = dispatch.New(r.store, c.pub, slog.New(c.warns), c.metrics, o)
		if err != nil {
			c.t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { defer close(r.done); _ = r.d.Run(ctx) }()
		c.replicas = append(c.replicas, r)
		c.t.Cleanup(r.stop)
	}
}

// stop is a graceful shutdown (SIGTERM): it returns once the replica exited.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// leader returns the replica holding q's lease, waiting for one.
func (c *cluster) leader(q string) *replica {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		v, _ := c.rdb.Get(context.Background(), redisstore.KeysFor(q).Lock()).Result()
		for _, r := range c.replicas {
			if v != "" && len(v) > len(r.owner) && v[:len(r.owner)+1] == r.owner+":" {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("no leader for %s within 10s", q)
	return nil
}

func (c *cluster) newQueue(mut func(*queue.Config)) string {
	c.t.Helper()
	q := testenv.ID(c.t)
	_, _, err := c.store.UpdateConfig(context.Background(), q, func(cfg queue.Config, _ bool) (queue.Config, error) {
		if mut != nil {
			mut(&cfg)
		}
		return cfg, nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = c.store.Purge(context.Background(), q) })
	// Tests share Redis with other packages' tests: each cluster serves only
	// its own queues.
	c.opts.Queues = append(c.opts.Queues, q)
	return q
}

func (c *cluster) fill(q string, n int) {
	c.t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := c.store.Enter(ctx, q, userName(i)); err != nil {
			c.t.Fatal(err)
		}
	}
}

// ticks groups TokenIssued events by the tick (Redis time) that issued them.
func ticks(events []queue.Event) (times []time.Time, counts map[time.Time]int) {
	counts = map[time.Time]int{}
	for _, e := range events {
		if counts[e.OccurredAt] == 0 {
			times = append(times, e.OccurredAt)
		}
		counts[e.OccurredAt]++
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return times, counts
}
