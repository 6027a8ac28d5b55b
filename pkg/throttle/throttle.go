// Package throttle holds per-key limits in one process's memory: a token
// bucket per key (golang.org/x/time/rate) and a cap on a key's requests in
// flight. Nothing here does I/O, so a refusal costs a map lookup under a
// shard's lock and never a Redis or database call: it is the limit that
// still holds when Redis is slow or the process is overloaded. Limits are
// per process: n replicas let a key through n times.
package throttle

import (
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Options configure a Limiter.
type Options struct {
	// PerSec is each key's rate; 0 leaves the rate unlimited.
	PerSec float64
	// Burst is how many a key may take at once; 0 means ceil(PerSec), at
	// least 1.
	Burst int
	// InFlight caps a key's requests between Acquire and Release; 0 leaves
	// it uncapped.
	InFlight int
	// MaxKeys bounds the keys remembered (DefaultMaxKeys when 0). A key
	// whose bucket is full and has nothing in flight is forgotten at no
	// cost (a new one would be the same); past the bound, other keys with
	// nothing in flight are forgotten at random, each of which may then
	// take a fresh burst.
	MaxKeys int
}

// DefaultMaxKeys is the bound on remembered keys when Options.MaxKeys is 0:
// about 200 bytes each, some 20 MB at the bound.
const DefaultMaxKeys = 100_000

const shards = 64

// Limiter limits requests by key. The zero value is not usable; New
// returns one. It is safe for concurrent use.
type Limiter struct {
	limit    rate.Limit
	burst    int
	inFlight int
	perShard int
	seed     maphash.Seed
	now      func() time.Time
	shards   [shards]shard
}

type shard struct {
	mu   sync.Mutex
	keys map[string]*entry
}

type entry struct {
	bucket   *rate.Limiter // nil without a rate
	inFlight int
}

// New returns a Limiter, or an error when o limits nothing or is negative.
func New(o Options) (*Limiter, error) {
	if o.PerSec < 0 || o.Burst < 0 || o.InFlight < 0 || o.MaxKeys < 0 || math.IsInf(o.PerSec, 0) || math.IsNaN(o.PerSec) {
		return nil, errors.New("throttle: rate, burst, in-flight cap and key bound must not be negative")
	}
	if o.PerSec == 0 && o.InFlight == 0 {
		return nil, errors.New("throttle: a rate or an in-flight cap is required")
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	l := &Limiter{limit: rate.Inf, burst: 1, inFlight: o.InFlight, perShard: max(1, o.MaxKeys/shards), seed: maphash.MakeSeed(), now: time.Now}
	if o.PerSec > 0 {
		l.limit = rate.Limit(o.PerSec)
		l.burst = o.Burst
		if l.burst == 0 {
			l.burst = max(1, int(math.Ceil(o.PerSec)))
		}
	}
	for i := range l.shards {
		l.shards[i].keys = make(map[string]*entry)
	}
	return l, nil
}

// minRetry is the least Retry-After a refusal suggests.
const minRetry = 100 * time.Millisecond

// Acquire takes one request for key. It reports whether the request may
// go on; a request that may must be ended by Release(key). A refused one
// takes nothing (it does not use up the key's rate) and gets how long to
// wait: until the bucket has a token again, or minRetry when the key is at
// its in-flight cap.
func (l *Limiter) Acquire(key string) (ok bool, retry time.Duration) {
	s := &l.shards[maphash.String(l.seed, key)%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	// Read under the lock: a bucket told an earlier time after a later one
	// counts the interval between them twice, and lets a flood through.
	now := l.now()
	e, found := s.keys[key]
	if !found {
		l.makeRoom(s, now)
		e = &entry{}
		if l.limit != rate.Inf {
			e.bucket = rate.NewLimiter(l.limit, l.burst)
		}
		s.keys[key] = e
	}
	if l.inFlight > 0 && e.inFlight >= l.inFlight {
		return false, minRetry
	}
	if e.bucket != nil {
		r := e.bucket.ReserveN(now, 1)
		if wait := r.DelayFrom(now); wait > 0 {
			r.CancelAt(now)
			return false, max(wait, minRetry)
		}
	}
	e.inFlight++
	return true, 0
}

// Release ends a request Acquire let through.
func (l *Limiter) Release(key string) {
	s := &l.shards[maphash.String(l.seed, key)%shards]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.keys[key]; ok && e.inFlight > 0 {
		e.inFlight--
	}
}

// Keys is how many keys are remembered now.
func (l *Limiter) Keys() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.keys)
		s.mu.Unlock()
	}
	return n
}

// makeRoom keeps s under its share of MaxKeys before a key is added: first
// it forgets the idle keys (a full bucket, nothing in flight), then, if s
// is still above seven eighths of its share, keys with nothing in flight
// in map order (random) until it is not. Either pass then leaves room for
// an eighth of the share, so the sweep runs at most once per that many new
// keys. s.mu is held.
func (l *Limiter) makeRoom(s *shard, now time.Time) {
	if len(s.keys) < l.perShard {
		return
	}
	for k, e := range s.keys {
		if e.inFlight == 0 && (e.bucket == nil || e.bucket.TokensAt(now) >= float64(l.burst)) {
			delete(s.keys, k)
		}
	}
	keep := l.perShard - max(1, l.perShard/8)
	for k, e := range s.keys {
		if len(s.keys) <= keep {
			break
		}
		if e.inFlight == 0 {
			delete(s.keys, k)
		}
	}
}

// Paces holds one token bucket per key whose rate the caller gives with
// every take (a queue's admission rate, as last read: it may change
// between calls), holding a tenth of a second of it plus one, so a crowd
// let through at once cannot arrive all together. The keys are few (the
// queues a replica serves), so the map is not bounded.
type Paces struct {
	mu    sync.Mutex
	byKey map[string]*rate.Limiter
}

// Take takes one from key's bucket at perSec a second; it returns 0 when
// it did, else how long until there will be one (a second when perSec
// allows none at all).
func (p *Paces) Take(key string, perSec float64, now time.Time) time.Duration {
	limit, burst := rate.Limit(perSec), int(math.Ceil(perSec/10))+1
	p.mu.Lock()
	if p.byKey == nil {
		p.byKey = map[string]*rate.Limiter{}
	}
	lim, ok := p.byKey[key]
	switch {
	case !ok:
		lim = rate.NewLimiter(limit, burst)
		p.byKey[key] = lim
	case lim.Limit() != limit || lim.Burst() != burst:
		lim.SetLimitAt(now, limit)
		lim.SetBurstAt(now, burst)
	}
	p.mu.Unlock()
	res := lim.ReserveN(now, 1)
	if !res.OK() {
		return time.Second
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return wait
	}
	return 0
}
