package testenv

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// Proxy is a TCP proxy for fault tests: put it between a client and a shared
// server and cut the line, slow every reply, or hold one reply past the
// client's timeout, without touching the server.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	cut     bool
	closed  bool
	conns   map[net.Conn]struct{} // both ends of every open pair
	wg      sync.WaitGroup        // the accept loop and two goroutines per pair
	stopped chan struct{}

	// delay is added before every chunk the server sends (nanoseconds).
	delay atomic.Int64
	// replDelay is added to the chunks of a replication link only: a pair
	// whose client sent PSYNC (a Redis replica syncing), so a master's
	// clients go through the same proxy undelayed.
	replDelay atomic.Int64
	// hold: the reply to the next request matching holdMatch is held for
	// holdFor before it is passed on (or dropped, if the client gave up).
	holdMatch func([]byte) bool
	holdFor   time.Duration
	held      atomic.Int64
	// delayRequests: requests matching delayMatch reach the server
	// delayFor late, each of up to delayLeft of them.
	delayMatch func([]byte) bool
	delayFor   time.Duration
	delayLeft  int
	delayed    atomic.Int64
	delivered  atomic.Int64
}

// StartProxy listens on 127.0.0.1:0 and forwards every connection to target.
// It is stopped, and its goroutines waited for, when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return StartProxyOn(t, "127.0.0.1", target)
}

// StartProxyOn is StartProxy listening on ip (a free port): the machine's
// end of a Host's link, so a process in that namespace reaches target,
// which listens on loopback only, through it.
func StartProxyOn(t testing.TB, ip, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, stopped: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

// DelayReplication delays the replication stream a Redis replica reads
// through the proxy by d (0 ends it): every chunk the server sends on a
// connection whose client sent PSYNC. Other connections are not delayed.
func (p *Proxy) DelayReplication(d time.Duration) { p.replDelay.Store(int64(d)) }

// Addr is the host:port clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and, until Restore, closes new ones as
// soon as they are accepted (a peer that resets, not a black hole).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeAll()
}

// Restore forwards new connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Delay adds d before every chunk a server sends back: every round trip
// through the proxy takes d longer. Zero turns it off.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(d)) }

// HoldNextReply holds, for d, the reply to the next request whose bytes
// match: the server has done the work, and a client whose read timeout is
// shorter than d gives up and (if it retries) sends the request again on
// another connection. Only one reply is held per call.
func (p *Proxy) HoldNextReply(match func(request []byte) bool, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdMatch, p.holdFor = match, d
}

// DelayRequests holds each of the next n requests whose bytes match for d
// before passing it on to the server: the request reaches the server late,
// after a client whose read timeout is shorter than d gave up on it (and,
// if it retries, after the retry on another connection was answered).
// The server still runs it: the connection to the server stays open until
// the request is written, whatever the client did meanwhile.
func (p *Proxy) DelayRequests(match func(request []byte) bool, d time.Duration, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delayMatch, p.delayFor, p.delayLeft = match, d, n
}

// Delayed is how many requests have been delayed so far.
func (p *Proxy) Delayed() int { return int(p.delayed.Load()) }

// DelayedDone is how many delayed requests have reached the server.
func (p *Proxy) DelayedDone() int { return int(p.delivered.Load()) }

// armDelay reports how long request must wait before it is passed on.
func (p *Proxy) armDelay(request []byte) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.delayLeft <= 0 || p.delayMatch == nil || !p.delayMatch(request) {
		return 0
	}
	p.delayLeft--
	p.delayed.Add(1)
	return p.delayFor
}

// Held is how many replies have been held so far.
func (p *Proxy) Held() int { return int(p.held.Load()) }

// armHold reports how long the reply to request must be held, disarming the
// hold when it matches.
func (p *Proxy) armHold(request []byte) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holdMatch == nil || !p.holdMatch(request) {
		return 0
	}
	p.holdMatch = nil
	p.held.Add(1)
	return p.holdFor
}

func (p *Proxy) stop() {
	p.mu.Lock()
	p.closed = true
	p.closeAll()
	p.mu.Unlock()
	close(p.stopped)
	_ = p.ln.Close()
	p.wg.Wait()
}

// closeAll needs p.mu.
func (p *Proxy) closeAll() {
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // listener closed by stop
		}
		p.wg.Add(1)
		go p.serve(client)
	}
}

// add registers c unless the line is cut or the proxy stopped.
func (p *Proxy) add(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) remove(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

// serve pipes one client to a fresh server connection until either side
// closes or Cut closes both.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.add(client) {
		_ = client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		p.remove(client)
		return
	}
	if !p.add(server) {
		_ = server.Close()
		p.remove(client)
		return
	}
	// hold is set by the request direction and used by the reply direction
	// of this one pair: clients like go-redis send one command per
	// connection at a time, so the next reply is the matched request's.
	var hold atomic.Int64
	var replica atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if d := p.armHold(buf[:n]); d > 0 {
					hold.Store(int64(d))
				}
				if !replica.Load() && bytes.Contains(buf[:n], []byte("PSYNC")) {
					replica.Store(true)
				}
				late := p.armDelay(buf[:n])
				if late > 0 && !p.sleep(late) {
					break
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					break
				}
				if late > 0 {
					p.delivered.Add(1)
					// The client may have closed its end meanwhile: keep
					// the server's open a moment, so the request is run
					// and not dropped with a reset.
					p.sleep(200 * time.Millisecond)
				}
			}
			if err != nil {
				break
			}
		}
		p.remove(client, server) // ends the other direction
	}()
	// Replies are read as they come and written when due: a delay is
	// latency added to every chunk, not a pause per chunk, so a large
	// reply costs one delay, as over a long link, not one per 32 KB.
	type chunk struct {
		data []byte
		due  time.Time
	}
	chunks := make(chan chunk, 1024)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for c := range chunks {
			if wait := time.Until(c.due); wait > 0 && !p.sleep(wait) {
				break
			}
			if _, err := client.Write(c.data); err != nil {
				break
			}
		}
		p.remove(client, server)
		for range chunks { // let the reader finish
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := server.Read(buf)
		if n > 0 {
			wait := time.Duration(hold.Swap(0)) + time.Duration(p.delay.Load())
			if replica.Load() {
				wait += time.Duration(p.replDelay.Load())
			}
			chunks <- chunk{data: buf[:n], due: time.Now().Add(wait)}
		}
		if err != nil {
			break
		}
	}
	close(chunks)
	<-written
	p.remove(client, server)
	<-done
}

// sleep waits d unless the proxy stops first.
func (p *Proxy) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.stopped:
		return false
	}
}

// ProxiedStore is a redisstore.Store whose client (redisstore.NewClient's
// defaults: 1 s read timeout, one retry) reaches the test Redis (RedisURL,
// same database) through a Proxy of its own, for tests that slow, hold or
// cut its replies. Both are closed when the test ends.
func ProxiedStore(t testing.TB) (*redisstore.Store, *Proxy) {
	t.Helper()
	u, err := url.Parse(RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := StartProxy(t, u.Host)
	u.Host = p.Addr()
	return StoreAt(t, u.String()), p
}

// StoreAt is a redisstore.Store on the server at url (a private
// redis-server, a proxy), with redisstore.NewClient's defaults; its client
// is closed when the test ends.
func StoreAt(t testing.TB, url string) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := redisstore.NewStore(rdb)
	if err != nil {
		t.Fatal(err)
	}
	// As redisstore.Connect does: Redis's clock read once, for the
	// deadlines of the requests that must not land late (a server not up
	// yet is read again on use).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.SyncClock(ctx)
	return s
}
