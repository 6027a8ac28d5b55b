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

	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Store is the state the dispatcher works on, in the three ports of its
// three owners (leases, ticks, relay). redisstore.Store implements it;
// dispatchtest has an in-memory fake, and the contract suite both keep
// (dispatchtest.RunStoreContract), whose rules are those of the Lua
// scripts. Leases and ticks go in rounds over many queues at once (one
// pipelined round trip each).
type Store interface {
	LeaseStore
	TickStore
	OutboxStore
}

// LeaseStore is leadership: the queues to compete for, their fenced
// leases, and the lines of a queue split into lines following its leader.
type LeaseStore interface {
	Queues(ctx context.Context) ([]string, error)
	AcquireLeases(ctx context.Context, owner string, qs []string, ttl time.Duration) []queue.LeaseReply
	RenewLeases(ctx context.Context, owner string, leases []queue.Lease, ttl time.Duration) []queue.LeaseReply
	ReleaseLease(ctx context.Context, q, owner string, epoch int64) error
	Unregister(ctx context.Context, q string) (bool, error)
	// A queue split into lines: its config copied to the lines, their
	// epochs raised to the leader's.
	SyncLines(ctx context.Context, q string) (int, error)
	FollowLeases(ctx context.Context, owner string, lines []queue.LineLease) []queue.LeaseReply
}

// TickStore is admission: a queue's knobs, one tick of every led queue,
// and the draw of a scheduled sale's pre-queue.
type TickStore interface {
	Config(ctx context.Context, q string) (queue.Config, queue.Stats, error)
	IssueAll(ctx context.Context, calls []queue.IssueCall) []queue.IssueReply
	StartDraw(ctx context.Context, q string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error)
	PlaceDrawn(ctx context.Context, q string, epoch int64, users []string) (queue.DrawWork, error)
	FinishDraw(ctx context.Context, q string, epoch int64, t queue.DrawTotals) (queue.DrawWork, error)
}

// OutboxStore is the relay's: the led queues' outboxes, read by this
// replica's consumer, confirmed on the replicas, acknowledged once
// published.
type OutboxStore interface {
	EnsureOutboxGroup(ctx context.Context, q string) error
	ReadOutboxes(ctx context.Context, consumer string, count int64, reads []queue.OutboxRead) ([]queue.OutboxBatch, error)
	OutboxReplicated(ctx context.Context, batches []queue.OutboxBatch) error
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
	// OutboxBound holds a queue's admission while its outbox holds this
	// many people's events the broker has not confirmed
	// (OUTBOX_MAX_BACKLOG); 0: none.
	OutboxBound int64
	// RelayPoll is how often the relay looks at every led queue's outbox
	// without being woken by a tick (events other replicas' restores wrote).
	RelayPoll time.Duration
	// Discovery is how often wr:queues is re-read.
	Discovery time.Duration
	// RelayBatch is the most outbox entries one relay round reads per
	// queue (a tick's admitted are one entry, however many they are).
	RelayBatch int64
	// DrawChunk is how many pre-queued people one call of a draw places.
	DrawChunk int
	// Queues, when set, limits this dispatcher to these queue ids (to shard
	// queues across dispatcher deployments); otherwise it serves every
	// queue in wr:queues.
	Queues []string
	// Tokens signs the entry tokens the ticks hand out (ENTRY_TOKEN_KEYS),
	// so the order-service can check them while Redis is down; nil: they
	// are unsigned.
	Tokens *grant.Signer
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
	if o.DrawChunk <= 0 {
		o.DrawChunk = 500
	}
}

// DefaultLease is short enough that a queue whose leader was killed admits
// again within a second (lease + one standby tick); fencing makes a short
// lease safe, since a leader that misses it can no longer issue.
const DefaultLease = 600 * time.Millisecond

// Dispatcher runs this replica's three owners: leases (which queues it
// leads), ticks (admission of those queues) and relay (their outboxes to
// the broker). Run starts each one's goroutine and waits for all of them.
type Dispatcher struct {
	store  Store
	log    *slog.Logger
	o      Options
	warn   *warnings
	health *healthReports
	relay  *relay
	leases *leases
	ticks  *ticks
}

// New returns a Dispatcher. m may be nil: then nothing is recorded.
func New(store Store, pub Publisher, log *slog.Logger, m Metrics, o Options) (*Dispatcher, error) {
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
		m = nopMetrics{}
	}
	log = log.With("owner", o.Owner)
	d := &Dispatcher{store: store, log: log, o: o, warn: newWarnings(log), health: newHealthReports()}
	d.relay = newRelay(store, pub, log, m, o)
	d.leases = newLeases(store, log, m, d.relay, d.warn, o)
	d.ticks = newTicks(store, d.leases, d.relay, d.health, log, m, d.warn, o)
	return d, nil
}

// Run discovers queues and competes for them, ticks the ones it leads and
// relays their outboxes until ctx ends; then, once every goroutine it
// started has returned, it releases every lease it holds, so a standby
// takes over within a tick. A queue that disappears from wr:queues has its
// lease released; a queue deleted and created again is competed for again.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { d.relay.run(ctx) })
	wg.Go(func() { d.leases.run(ctx) })
	wg.Go(func() { d.ticks.run(ctx) })
	defer func() {
		wg.Wait()
		d.leases.releaseAll(ctx)
	}()
	allowed := map[string]bool{}
	for _, q := range d.o.Queues {
		allowed[q] = true
	}
	t := time.NewTicker(d.o.Discovery)
	defer t.Stop()
	for {
		ids, err := d.store.Queues(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				d.warn.every("list queues", "err", err)
			}
		default:
			serve := ids[:0]
			for _, q := range ids {
				if queue.ValidID(q) && (len(allowed) == 0 || allowed[q]) {
					serve = append(serve, q)
				}
			}
			d.leases.serve(ctx, serve)
			d.health.keep(serve)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
