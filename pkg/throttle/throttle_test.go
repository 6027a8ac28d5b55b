package throttle

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time for the limiter's buckets.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newAt(t *testing.T, o Options) (*Limiter, *clock) {
	t.Helper()
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l.now = c.now
	return l, c
}

// A key gets its burst at once, then its rate; another key is not touched
// by the first one's refusals, and a refusal takes nothing from the bucket.
func TestRateIsPerKey(t *testing.T) {
	l, clk := newAt(t, Options{PerSec: 5, Burst: 10})
	allowed := func(key string, n int) (int, time.Duration) {
		got, longest := 0, time.Duration(0)
		for range n {
			ok, retry := l.Acquire(key)
			if ok {
				got++
				l.Release(key)
			} else {
				longest = max(longest, retry)
			}
		}
		return got, longest
	}
	if got, retry := allowed("mallory", 100); got != 10 || retry < minRetry || retry > time.Second {
		t.Fatalf("a burst of 100: %d allowed (want 10), Retry-After %v (want 100ms..1s)", got, retry)
	}
	if got, _ := allowed("alice", 3); got != 3 {
		t.Fatalf("another key during the first one's flood: %d of 3 allowed", got)
	}
	clk.add(time.Second)
	if got, _ := allowed("mallory", 100); got != 5 {
		t.Fatalf("a second later: %d allowed, want 5 (the rate; the refusals took nothing)", got)
	}
}

// However many goroutines ask at once, a key never has more than its cap
// in flight; every one that is let in is released, and then the key takes
// requests again.
func TestInFlightCapHoldsUnderConcurrency(t *testing.T) {
	const callers, capacity = 64, 4
	l, _ := newAt(t, Options{InFlight: capacity})
	var inside, most, admitted, refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			for range 50 {
				ok, retry := l.Acquire("one-user")
				if !ok {
					refused.Add(1)
					if retry != minRetry {
						errs <- fmt.Errorf("refused at the cap with Retry-After %v, want %v", retry, minRetry)
						return
					}
					continue
				}
				admitted.Add(1)
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(50 * time.Microsecond)
				inside.Add(-1)
				l.Release("one-user")
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d admitted, %d refused, at most %d in flight", admitted.Load(), refused.Load(), most.Load())
	if most.Load() > capacity || most.Load() < 1 || admitted.Load()+refused.Load() != callers*50 {
		t.Fatalf("at most %d in flight (cap %d); %d admitted + %d refused, want %d", most.Load(), capacity, admitted.Load(), refused.Load(), callers*50)
	}
	for range capacity {
		if ok, _ := l.Acquire("one-user"); !ok {
			t.Fatal("after every release the key is refused")
		}
	}
}

// Keys are bounded: a flood of fresh keys (many accounts, many addresses)
// never holds more than MaxKeys, and keys with requests in flight are never
// forgotten (their cap would be lost).
func TestKeysAreBounded(t *testing.T) {
	const bound = 64 * 16
	l, _ := newAt(t, Options{PerSec: 1, InFlight: 1, MaxKeys: bound})
	held := []string{"held-1", "held-2", "held-3"}
	for _, k := range held {
		if ok, _ := l.Acquire(k); !ok {
			t.Fatal(k)
		}
	}
	for i := range 20 * bound {
		k := fmt.Sprintf("k%d", i)
		if ok, _ := l.Acquire(k); !ok {
			t.Fatalf("fresh key %s refused", k)
		}
		l.Release(k)
	}
	if n := l.Keys(); n > bound+len(held) {
		t.Fatalf("%d keys remembered, want at most %d", n, bound+len(held))
	}
	for _, k := range held {
		if ok, _ := l.Acquire(k); ok {
			t.Fatalf("%s was forgotten while in flight: a second request got in past its cap of 1", k)
		}
	}
}

// An idle key (full bucket, nothing in flight) is forgotten first: a key
// that used its burst is remembered while 8,192 fresh keys come and go
// (twice the bound), each idle again 100 ms after its one request, so it
// gets back only what its bucket refilled, never a fresh burst.
func TestIdleKeysAreForgottenFirst(t *testing.T) {
	const bound = 64 * 64
	l, clk := newAt(t, Options{PerSec: 10, MaxKeys: bound})
	for range 10 {
		l.Acquire("busy")
		l.Release("busy")
	}
	for i := range 2 * bound {
		clk.add(50 * time.Microsecond)
		l.Acquire(fmt.Sprint("k", i))
		l.Release(fmt.Sprint("k", i))
	}
	if n := l.Keys(); n > bound {
		t.Fatalf("%d keys remembered, want at most %d", n, bound)
	}
	// 8,192 x 50 us = 410 ms at 10/s: 4 tokens refilled.
	got := 0
	for range 20 {
		if ok, _ := l.Acquire("busy"); ok {
			got++
			l.Release("busy")
		}
	}
	if got != 4 {
		t.Fatalf("the busy key took %d, want 4 (what it refilled; 10 would be a forgotten key's fresh burst)", got)
	}
}

func TestNewRefusesNothingToLimit(t *testing.T) {
	for _, o := range []Options{{}, {PerSec: -1}, {InFlight: -1}, {PerSec: 1, MaxKeys: -1}, {Burst: 3}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
