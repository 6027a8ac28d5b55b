package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy for fault tests: put it between a client and a shared
// server and cut the line without touching the server.
type Proxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // both ends of every open pair
	wg     sync.WaitGroup        // the accept loop and one goroutine per pair
}

// StartProxy listens on 127.0.0.1:0 and forwards every connection to target.
// It is stopped, and its goroutines waited for, when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.stop)
	return p
}

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

func (p *Proxy) stop() {
	p.mu.Lock()
	p.closed = true
	p.closeAll()
	p.mu.Unlock()
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
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(server, client)
		p.remove(client, server) // ends the other direction
	}()
	_, _ = io.Copy(client, server)
	p.remove(client, server)
	<-done
}
