// Package dispatch is the admission loop: for every known queue, one replica
// in the fleet leads (holds the queue's fenced lease), admits the head of the
// line every tick at the queue's rate, and relays the queue's outbox to the
// broker. Other replicas stand by and take over when the lease lapses.
package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Store is the state the dispatcher works on. redisstore.Store implements it.
type Store interface {
	Queues(ctx context.Context) ([]string, error)
	Config(ctx context.Context, q string) (queue.Config, queue.Stats, error)
	AcquireLease(ctx context.Context, q, owner string, ttl time.Duration) (int64, error)
	RenewLease(ctx context.Context, q, owner string, epoch int64, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, q, owner string, epoch int64) error
	Issue(ctx context.Context, q string, epoch int64, tick time.Duration, grants []queue.Grant) (queue.IssueResult, error)

	EnsureOutboxGroup(ctx context.Context, q string) error
	ReadOutbox(ctx context.Context, q, consumer string, count int64, block time.Duration) ([]queue.Event, error)
	ClaimOutbox(ctx context.Context, q, consumer string, minIdle time.Duration, count int64) ([]queue.Event, error)
	AckOutbox(ctx context.Context, q string, streamIDs []string) error
	OutboxLen(ctx context.Context, q string) (int64, error)
}

// Publisher publishes outbox events and returns once the broker confirmed
// every one of them.
type Publisher interface {
	Publish(ctx context.Context, events []queue.Event) error
}

// Options tune the dispatcher. Zero values take the defaults.
type Options struct {
	// Owner identifies this replica in leases and as the relay consumer.
	Owner string
	// Tick is the admission period (DISPATCH_TICK).
	Tick time.Duration
	// Lease is how long a lease lives without renewal; renewed at a third.
	Lease time.Duration
	// Discovery is how often wr:queues is re-read.
	Discovery time.Duration
	// RelayBatch is the most events published per broker round.
	RelayBatch int64
	// Queues, when set, limits this dispatcher to these queue ids (to shard
	// queues across dispatcher deployments); otherwise it serves every
	// queue in wr:queues.
	Queues []string
}

func (o *Options) defaults() {
	if o.Tick <= 0 {
		o.Tick = 100 * time.Millisecond
	}
	if o.Lease <= 0 {
		o.Lease = 3 * time.Second
	}
	if o.Discovery <= 0 {
		o.Discovery = time.Second
	}
	if o.RelayBatch <= 0 {
		o.RelayBatch = 500
	}
}

// Dispatcher runs a worker per known queue.
type Dispatcher struct {
	store Store
	pub   Publisher
	log   *slog.Logger
	m     *Metrics
	o     Options
}

// New returns a Dispatcher. metrics may be nil.
func New(store Store, pub Publisher, log *slog.Logger, m *Metrics, o Options) (*Dispatcher, error) {
	if store == nil || pub == nil || log == nil {
		return nil, errors.New("dispatch: store, publisher and logger are required")
	}
	if o.Owner == "" {
		return nil, errors.New("dispatch: an owner id is required")
	}
	o.defaults()
	if o.Lease < 3*o.Tick {
		return nil, errors.New("dispatch: the lease must be at least three ticks")
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Dispatcher{store: store, pub: pub, log: log.With("owner", o.Owner), m: m, o: o}, nil
}

// Run discovers queues and runs one worker per queue until ctx ends; then it
// waits for every worker, each of which releases the lease it holds. A queue
// that disappears from wr:queues has its worker stopped.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]context.CancelFunc{}
	defer func() {
		for _, stop := range running {
			stop()
		}
	}()
	allowed := map[string]bool{}
	for _, q := range d.o.Queues {
		allowed[q] = true
	}
	t := time.NewTicker(d.o.Discovery)
	defer t.Stop()
	for {
		ids, err := d.store.Queues(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("list queues", "err", err)
			}
		} else {
			seen := map[string]bool{}
			for _, q := range ids {
				if !queue.ValidID(q) || (len(allowed) > 0 && !allowed[q]) {
					continue
				}
				seen[q] = true
				if running[q] != nil {
					continue
				}
				wctx, stop := context.WithCancel(ctx)
				running[q] = stop
				w := &worker{d: d, q: q, log: d.log.With("queue", q)}
				wg.Go(func() { w.run(wctx) })
			}
			for q, stop := range running {
				if !seen[q] {
					stop()
					delete(running, q)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
