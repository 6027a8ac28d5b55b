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
	Issue(ctx context.Context, q string, r queue.IssueRequest) (queue.IssueResult, error)
	Unregister(ctx context.Context, q string) (bool, error)

	EnsureOutboxGroup(ctx context.Context, q string) error
	ReadOutboxes(ctx context.Context, consumer string, count int64, reads []queue.OutboxRead) ([]queue.OutboxBatch, error)
	ClaimOutbox(ctx context.Context, q, consumer string, minIdle time.Duration, count int64) ([]queue.Event, error)
	AckOutboxes(ctx context.Context, batches []queue.OutboxBatch) error
	OutboxLens(ctx context.Context, qs []string) (map[string]int64, error)
	PruneOutboxConsumers(ctx context.Context, q, self string, idle time.Duration) (int, error)
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
	// OutboxBound holds a queue's admission while its outbox has this many
	// events the broker has not confirmed (OUTBOX_MAX_BACKLOG); 0: none.
	OutboxBound int64
	// RelayPoll is how often the relay looks at every led queue's outbox
	// without being woken by a tick (events other replicas' restores wrote).
	RelayPoll time.Duration
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
		o.Lease = DefaultLease
	}
	if o.RelayPoll <= 0 {
		o.RelayPoll = 100 * time.Millisecond
	}
	if o.Discovery <= 0 {
		o.Discovery = time.Second
	}
	if o.RelayBatch <= 0 {
		o.RelayBatch = 500
	}
}

// DefaultLease is short enough that a queue whose leader was killed admits
// again within a second (lease + one standby tick); fencing makes a short
// lease safe, since a leader that misses it can no longer issue.
const DefaultLease = 600 * time.Millisecond

// Dispatcher runs a worker per known queue and one relay for the queues
// this replica leads.
type Dispatcher struct {
	store Store
	pub   Publisher
	log   *slog.Logger
	m     *Metrics
	o     Options
	relay *relay
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
	d := &Dispatcher{store: store, pub: pub, log: log.With("owner", o.Owner), m: m, o: o}
	d.relay = newRelay(d)
	return d, nil
}

// Run discovers queues and runs one worker per queue, and the relay, until
// ctx ends; then it waits for every worker, each of which releases the lease
// it holds. A queue that disappears from wr:queues has its worker stopped; a
// worker that ends by itself (its queue was deleted) is started again if the
// queue comes back.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]*worker{}
	defer func() {
		for _, w := range running {
			w.stop()
		}
	}()
	wg.Go(func() { d.relay.run(ctx) })
	allowed := map[string]bool{}
	for _, q := range d.o.Queues {
		allowed[q] = true
	}
	ended := make(chan *worker)
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
				w := &worker{d: d, q: q, log: d.log.With("queue", q), stop: stop}
				running[q] = w
				wg.Go(func() {
					w.run(wctx)
					select {
					case ended <- w:
					case <-ctx.Done():
					}
				})
			}
			for q, w := range running {
				if !seen[q] {
					w.stop()
					delete(running, q)
				}
			}
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return nil
			case w := <-ended:
				if running[w.q] == w {
					w.stop()
					delete(running, w.q)
				}
			case <-t.C:
				waiting = false
			}
		}
	}
}
