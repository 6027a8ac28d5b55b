package httpapi

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// gate is work that waits for release; ran counts the runs that ended.
type gate struct {
	started chan<- struct{}
	release <-chan struct{}
	ran     *atomic.Int32
}

func (g *gate) run(buf []byte) []byte {
	g.started <- struct{}{}
	<-g.release
	g.ran.Add(1)
	return buf
}

// state is the pool's bookkeeping: goroutines running, of which idle, and
// work queued.
func (p *pool[T]) state() (running, idle, queued int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running, p.idle, len(p.queue)
}

const poolWork = "httpapi.(*pool[...]).work"

// A busy pool runs at most its limit of goroutines; once the work is done
// they wait for more (an hour here), and close ends them at once, waits
// for them, and refuses work afterwards.
func TestPoolCloseEndsItsWaitingGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	const limit, n = 3, 10
	p := &pool[*gate]{limit: func() int { return limit }, linger: time.Hour}
	started := make(chan struct{}, n+1)
	release := make(chan struct{})
	var ran atomic.Int32
	for range n {
		if !p.push(&gate{started: started, release: release, ran: &ran}) {
			t.Fatal("an open pool refused work")
		}
	}
	for i := range limit {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d goroutines started within 30s", i, limit)
		}
	}
	if running, idle, queued := p.state(); running != limit || idle != 0 || queued != n-limit {
		t.Fatalf("busy pool: %d running, %d idle, %d queued; want %d, 0, %d", running, idle, queued, limit, n-limit)
	}
	if got := goroutinesIn(poolWork); got != limit {
		t.Fatalf("%d goroutines in pool.work, want %d", got, limit)
	}
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, idle, _ := p.state()
		if ran.Load() == n && idle == limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d of %d ran, %d goroutines waiting for more, want %d", ran.Load(), n, idle, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}

	within(t, 30*time.Second, "close", p.close)
	if running, idle, queued := p.state(); running != 0 || idle != 0 || queued != 0 {
		t.Fatalf("closed pool: %d running, %d idle, %d queued; want none", running, idle, queued)
	}
	if got := goroutinesIn(poolWork); got != 0 {
		t.Fatalf("%d goroutines in pool.work after close returned, want 0", got)
	}
	if p.push(&gate{started: started, release: release, ran: &ran}) {
		t.Fatal("a closed pool took work")
	}
	if running, _, queued := p.state(); running != 0 || queued != 0 || ran.Load() != n {
		t.Fatalf("work pushed after close: %d running, %d queued, %d ran; want 0, 0, %d", running, queued, ran.Load(), n)
	}
	noneLeft(t, before) // within's goroutine, which ran close, ends a moment after it
}

// close lets the work pushed before it run to its end, and returns only
// then.
func TestPoolCloseWaitsForTheWorkPushedBefore(t *testing.T) {
	before := goleak.IgnoreCurrent()
	const limit, n = 2, 5
	p := &pool[*gate]{limit: func() int { return limit }}
	started := make(chan struct{}, n)
	release := make(chan struct{})
	var ran atomic.Int32
	for range n {
		p.push(&gate{started: started, release: release, ran: &ran})
	}
	for i := range limit {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d goroutines started within 30s", i, limit)
		}
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		p.close()
	}()
	// Both goroutines hold work that waits for release: close cannot
	// have returned.
	select {
	case <-closed:
		t.Fatal("close returned while its goroutines were still running work")
	default:
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("close did not return within 30s of the work's release")
	}
	if ran.Load() != n {
		t.Fatalf("%d of the %d runs pushed before close ran", ran.Load(), n)
	}
	if got := goroutinesIn(poolWork); got != 0 {
		t.Fatalf("%d goroutines in pool.work after close returned, want 0", got)
	}
	noneLeft(t, before) // the test's own goroutine that called close ends a moment later
}
