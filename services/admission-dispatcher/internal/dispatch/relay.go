package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Relay timing. claimIdle is how long another consumer's unacknowledged
// events must sit before this leader takes them over (its predecessor died
// mid-publish); consumers idle for consumerIdle with nothing pending are
// deleted from the group.
const (
	claimIdle     = 2 * time.Second
	claimEvery    = 5 * time.Second
	consumerIdle  = time.Minute
	pruneEvery    = 30 * time.Second
	backlogEvery  = time.Second
	relayMaxPause = 2 * time.Second
	minRelayBatch = 10
)

// relay moves the outboxes of every queue this replica leads to the broker:
// one loop per replica, one pipelined non-blocking read for all queues per
// round, publish with confirms, then acknowledge and delete. An event is
// deleted only after the broker confirmed it, so a crash or a broker outage
// delays events and loses none (it may publish one twice).
//
// It never blocks on a stream: a blocking read per queue would hold one
// pooled connection per queue, and with more queues than connections the
// admission ticks would wait for the pool.
type relay struct {
	store OutboxStore
	pub   Publisher
	log   *slog.Logger
	m     Metrics
	owner string        // the consumer name in the outboxes' groups
	poll  time.Duration // Options.RelayPoll
	most  int64         // Options.RelayBatch
	wake  chan struct{}
	// batch is how many events one read asks for per queue: RelayBatch,
	// halved after a round that failed (a slow link times out on large
	// replies, and asking for the same large batch again would time out
	// again), doubled back after each round that worked.
	batch int64

	mu  sync.Mutex
	led map[string]*relayed
}

// relayed is the relay's state of one led queue.
type relayed struct {
	grouped   bool // the consumer group exists
	pending   bool // re-read own unacknowledged events first
	lastClaim time.Time
	lastPrune time.Time
}

func newRelay(store OutboxStore, pub Publisher, log *slog.Logger, m Metrics, o Options) *relay {
	return &relay{store: store, pub: pub, log: log, m: m, owner: o.Owner, poll: o.RelayPoll, most: o.RelayBatch,
		wake: make(chan struct{}, 1), led: map[string]*relayed{}, batch: o.RelayBatch}
}

// add starts relaying q (this replica leads it now). Events a previous
// leader read and never acknowledged are claimed at the first round.
func (r *relay) add(q string) {
	r.mu.Lock()
	r.led[q] = &relayed{pending: true}
	r.mu.Unlock()
	r.kick()
}

// remove stops relaying q.
// errLedChanged: a round read a queue that was done with (stepped down
// from, its keys deleted) while it ran.
var errLedChanged = errors.New("a queue relayed was done with during the round")

// leads reports whether the relay still relays q.
func (r *relay) leads(q string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.led[q]
	return ok
}

func (r *relay) remove(q string) {
	r.mu.Lock()
	delete(r.led, q)
	r.mu.Unlock()
	r.m.StoppedRelaying(q)
}

// kick wakes the relay: a tick wrote events.
func (r *relay) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run relays until ctx ends; the Dispatcher's Run starts it and waits for
// it.
func (r *relay) run(ctx context.Context) {
	pause := time.Duration(0)
	lastBacklog := time.Time{}
	for {
		wait := r.poll
		if pause > 0 {
			wait = pause
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wake:
			if pause > 0 { // backing off: a kick does not cut the pause short
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
		err := r.round(ctx)
		if err != nil {
			r.batch = max(r.batch/2, minRelayBatch)
		} else {
			r.batch = min(2*r.batch, r.most)
		}
		if time.Since(lastBacklog) >= backlogEvery {
			lastBacklog = time.Now()
			r.observeBacklog(ctx)
		}
		if errors.Is(err, errLedChanged) {
			// A queue was done with during the round (its outbox deleted
			// with it): nothing failed, go again without it.
			r.log.Debug("outbox relay: a queue went during the round", "err", err)
			r.kick()
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("outbox relay", "err", err, "retry_in", backoff(pause).String())
			}
			pause = backoff(pause)
			continue
		}
		pause = 0
	}
}

// snapshot copies the led queues' names and state for one round.
func (r *relay) snapshot() map[string]*relayed {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*relayed, len(r.led))
	for q, s := range r.led {
		out[q] = s
	}
	return out
}

// round reads every led queue once, publishes what it found, and
// acknowledges it. The per-queue state is only touched here (one goroutine).
func (r *relay) round(ctx context.Context) error {
	led := r.snapshot()
	if len(led) == 0 {
		return nil
	}
	var found []queue.OutboxBatch
	reads := make([]queue.OutboxRead, 0, len(led))
	for q, s := range led {
		if !s.grouped {
			if err := r.store.EnsureOutboxGroup(ctx, q); err != nil {
				r.log.Warn("outbox group", "queue", q, "err", err)
				continue
			}
			s.grouped = true
		}
		if time.Since(s.lastClaim) >= claimEvery {
			s.lastClaim = time.Now()
			evs, err := r.store.ClaimOutbox(ctx, q, r.owner, claimIdle, r.batch)
			if err != nil && r.leads(q) {
				r.log.Warn("claim outbox", "queue", q, "err", err)
			} else if err != nil {
				r.log.Debug("claim outbox of a queue done with", "queue", q, "err", err)
			}
			if len(evs) > 0 {
				found = append(found, queue.OutboxBatch{QueueID: q, Events: evs})
				continue
			}
		}
		if time.Since(s.lastPrune) >= pruneEvery {
			s.lastPrune = time.Now()
			if n, err := r.store.PruneOutboxConsumers(ctx, q, r.owner, consumerIdle); err != nil {
				r.log.Debug("prune outbox consumers", "queue", q, "err", err)
			} else if n > 0 {
				r.log.Info("deleted idle outbox consumers", "queue", q, "count", n)
			}
		}
		reads = append(reads, queue.OutboxRead{QueueID: q, Pending: s.pending})
	}
	batches, err := r.store.ReadOutboxes(ctx, r.owner, r.batch, reads)
	if err != nil {
		// A read whose reply was lost still delivered its events to this
		// consumer: re-read its own pending events first next round.
		for _, rd := range reads {
			led[rd.QueueID].pending = true
		}
		for q := range led {
			if !r.leads(q) {
				return fmt.Errorf("%w: %s: %w", errLedChanged, q, err)
			}
		}
		return err
	}
	for _, b := range batches {
		s := led[b.QueueID]
		switch {
		case b.Err != nil:
			// The group may be gone with a deleted queue, or the slot
			// moving: look again next round, own pending events first.
			r.log.Debug("read outbox", "queue", b.QueueID, "err", b.Err)
			s.grouped, s.pending = false, true
		case len(b.Events) == 0:
			s.pending = false // nothing of ours left unacknowledged
		default:
			found = append(found, b)
		}
	}
	if len(found) == 0 {
		return nil
	}
	// Published only once the replicas hold them: an admission a failover
	// then undid would be admitted again by the new primary.
	if err := r.store.OutboxReplicated(ctx, found); err != nil {
		for _, b := range found {
			led[b.QueueID].pending = true
		}
		return err
	}
	events := found[0].Events
	if len(found) > 1 {
		// One queue's read is published as read; several are joined (a
		// tick at 50,000 a second is some 5,000 events: not copied for
		// nothing).
		n := 0
		for _, b := range found {
			n += len(b.Events)
		}
		events = make([]queue.Event, 0, n)
		for _, b := range found {
			events = append(events, b.Events...)
		}
	}
	if err := r.pub.Publish(ctx, events); err != nil {
		for _, b := range found {
			led[b.QueueID].pending = true
		}
		return err
	}
	if err := r.store.AckOutboxes(ctx, found); err != nil {
		for _, b := range found {
			led[b.QueueID].pending = true
		}
		return err
	}
	r.m.Published(events)
	// More may be waiting (a read took all the entries it asked for): go
	// again at once.
	if slices.ContainsFunc(found, func(b queue.OutboxBatch) bool { return entries(b.Events) >= r.batch }) {
		r.kick()
	}
	return nil
}

// entries is how many outbox entries events were read from: a tick's
// admitted are one entry (TokensIssued), read back as an event each, all
// with its stream id and next to each other.
func entries(events []queue.Event) int64 {
	n := int64(0)
	for i, e := range events {
		if i == 0 || e.StreamID != events[i-1].StreamID {
			n++
		}
	}
	return n
}

func (r *relay) observeBacklog(ctx context.Context) {
	led := r.snapshot()
	qs := make([]string, 0, len(led))
	for q := range led {
		qs = append(qs, q)
	}
	lens, err := r.store.OutboxLens(ctx, qs)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for q, n := range lens {
		if r.led[q] != nil { // still led: a removed queue's gauge stays deleted
			r.m.Backlog(q, n)
		}
	}
}

func backoff(d time.Duration) time.Duration {
	if d == 0 {
		return 100 * time.Millisecond
	}
	return min(2*d, relayMaxPause)
}
