// Package presence batches the sightings of people waiting in line (a poll,
// an enter, an open event stream) so that telling Redis who is still there
// costs one call a line a second per replica, not one a poll. The queue
// knob awayAfterSeconds turns presence on; the tick sweeps the people not
// seen for that long out of the line (docs/DESIGN.md, "Presence").
package presence

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/waitingroom/waitingroom/pkg/queue"
)

// Every is how often a Book sends its sightings. A person's last sighting
// reaches Redis at most this late, which queue.MaxPollFor leaves room for.
const Every = queue.SightingsEvery

// MaxPending is the most people one Book holds unsent sightings of, over
// all queues: a flood of polls from a million ids costs bounded memory
// (about 100 bytes each); beyond it a sighting is dropped and counted.
const MaxPending = 500_000

// Recorder is where sightings go: redisstore.Store implements it.
type Recorder interface {
	Sighted(ctx context.Context, q string, users []string) (queue.Sightings, error)
}

// Metrics observes a Book: a batch sent for a queue (how many people, what
// they did, the error), and sightings dropped over MaxPending.
type Metrics interface {
	Sent(q string, users int, got queue.Sightings, err error)
	Dropped(n int)
}

type nopMetrics struct{}

func (nopMetrics) Sent(string, int, queue.Sightings, error) {}
func (nopMetrics) Dropped(int)                              {}

// shards of the pending set, so polls on many cores do not queue on one
// lock.
const shards = 16

type shard struct {
	mu      sync.Mutex
	pending map[string]map[string]struct{} // queue -> users
	n       int
}

// Book holds the sightings of one replica until its next send.
type Book struct {
	rec     Recorder
	m       Metrics
	seed    maphash.Seed
	shards  [shards]shard
	timeout time.Duration
}

// New returns a Book that sends to rec; m may be nil.
func New(rec Recorder, m Metrics) *Book {
	if m == nil {
		m = nopMetrics{}
	}
	b := &Book{rec: rec, m: m, seed: maphash.MakeSeed(), timeout: Every}
	for i := range b.shards {
		b.shards[i].pending = map[string]map[string]struct{}{}
	}
	return b
}

// Saw notes that user of queue q showed a sign of life. It never blocks on
// Redis.
func (b *Book) Saw(q, user string) {
	sh := &b.shards[maphash.String(b.seed, user)%shards]
	sh.mu.Lock()
	users := sh.pending[q]
	if users == nil {
		users = map[string]struct{}{}
		sh.pending[q] = users
	}
	if _, dup := users[user]; !dup {
		if sh.n >= MaxPending/shards {
			sh.mu.Unlock()
			b.m.Dropped(1)
			return
		}
		users[user] = struct{}{}
		sh.n++
	}
	sh.mu.Unlock()
}

// take empties the Book: every queue's users.
func (b *Book) take() map[string][]string {
	out := map[string][]string{}
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		pending := sh.pending
		sh.pending, sh.n = map[string]map[string]struct{}{}, 0
		sh.mu.Unlock()
		for q, users := range pending {
			for u := range users {
				out[q] = append(out[q], u)
			}
		}
	}
	return out
}

// Flush sends every pending sighting now, one call a queue (the store
// splits it by line), and returns the first error. Sightings of a failed
// call are dropped: the people are seen again at their next poll, well
// within the away time the poll interval leaves room for.
func (b *Book) Flush(ctx context.Context) error {
	var first error
	for q, users := range b.take() {
		cctx, cancel := context.WithTimeout(ctx, b.timeout)
		got, err := b.rec.Sighted(cctx, q, users)
		cancel()
		b.m.Sent(q, len(users), got, err)
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Run sends the sightings every Every until ctx ends, then once more (the
// last second's, so a replica that stops does not make its people away).
// It returns nil: a failed send is counted and the next one goes on.
func (b *Book) Run(ctx context.Context) error {
	t := time.NewTicker(Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
			_ = b.Flush(final)
			cancel()
			return nil
		case <-t.C:
			_ = b.Flush(ctx)
		}
	}
}
