// Package broker is the shared AMQP 0-9-1 layer of the waiting room: one
// self-healing connection to RabbitMQ, a single node or any node of a
// cluster (Conn), confirmed publishing of
// protobuf events with CloudEvents headers (Publisher), and consumers with
// manual acks that resubscribe after every reconnect (Conn.Consume).
//
// amqp091-go does not reconnect by itself (its optional recovery is left
// off): a supervisor goroutine watches NotifyClose, redials (through the
// other nodes of a cluster first, then with jittered backoff) and
// redeclares the topology; publishers and consumers open fresh channels on
// the new connection. Every queue it declares is a quorum queue (replicated)
// or exclusive to one connection, so no single node of a cluster is needed
// by everyone.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const defaultExchange = "waitingroom.events"

// ErrClosed is returned by Ready, Publish and Consume once Close was called.
var ErrClosed = errors.New("broker: connection closed")

// Options configures a Conn.
type Options struct {
	// Exchange is the durable topic exchange events go to; default
	// "waitingroom.events". Tests pass their own name.
	Exchange string
	// Source is the cloudEvents:source header value, e.g. "/admission-dispatcher";
	// default "/" + the program's name. It also names the connection and
	// consumer tags in the broker.
	Source string
	// Log receives reconnect warnings and handler panics. Required.
	Log *slog.Logger
	// MinBackoff and MaxBackoff bound the jittered, doubling reconnect delay;
	// defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration
}

// link is one live AMQP connection.
type link struct {
	conn *amqp.Connection
	lost chan struct{} // closed once the supervisor has seen conn die
}

// Conn keeps one AMQP connection alive: it connects in the background,
// reconnects after any loss (broker restart, node crash, connection closed
// by the server, network cut), and on every (re)connect declares the
// topology: the exchange and the dead-letter exchange "<Exchange>.dlx",
// both topic and durable, and (best effort, see declareParking) the
// quorum queue that parks unrouted events.
type Conn struct {
	urls   []string // one per node, tried in turn
	addrs  []string // their host:port, for logs
	next   int      // the URL the next dial starts with; the supervisor's alone
	o      Options
	ctx    context.Context // ends at Close
	cancel context.CancelFunc

	mu      sync.Mutex
	link    *link         // nil while disconnected
	up      chan struct{} // closed when link is set; replaced when it is lost
	lastErr error         // why we are not connected, for Healthy
	closed  bool
	wg      sync.WaitGroup // the supervisor, publisher dispatchers, running Consume calls
}

// New validates the URL and options and starts connecting in the background.
// It returns at once; it does not wait for the broker (see Ready).
//
// url is one amqp:// (or amqps://) URL, or one per node of a cluster
// separated by commas ("amqp://u:p@rabbit-0:5672/,amqp://u:p@rabbit-1:5672/").
// The first dial starts at a random one, so replicas spread over the nodes;
// a node that does not answer is skipped for the next at once, and after a
// lost connection the next dial starts with the node after the lost one.
func New(url string, o Options) (*Conn, error) {
	if o.Log == nil {
		return nil, errors.New("broker: Options.Log is required")
	}
	urls, addrs, err := splitURLs(url)
	if err != nil {
		return nil, err
	}
	if o.Exchange == "" {
		o.Exchange = defaultExchange
	}
	if o.Source == "" {
		o.Source = "/" + filepath.Base(os.Args[0]) // CloudEvents requires a non-empty source
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{urls: urls, addrs: addrs, next: rand.N(len(urls)), o: o, ctx: ctx, cancel: cancel,
		up: make(chan struct{}), lastErr: errors.New("connecting")}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.supervise()
	}()
	return c, nil
}

// Ready waits until the connection is up (or ctx ends, or Close is called).
func (c *Conn) Ready(ctx context.Context) error {
	_, err := c.current(ctx)
	return err
}

// Healthy returns nil while connected and the reason otherwise; for /readyz.
func (c *Conn) Healthy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case c.link != nil && !c.link.conn.IsClosed():
		return nil
	default:
		return fmt.Errorf("broker: not connected: %v", c.lastErr)
	}
}

// Close stops reconnecting, closes the connection (and so every channel),
// makes running Consume calls return (their handlers' ctx is cancelled and
// Close waits for them, so a handler must not call Close) and waits for every
// goroutine it started. Calling it again does nothing.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// current returns the live connection, waiting for one if needed.
func (c *Conn) current(ctx context.Context) (*link, error) {
	for {
		c.mu.Lock()
		closed, l, up := c.closed, c.link, c.up
		c.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		wait := up
		if l != nil {
			if !l.conn.IsClosed() {
				return l, nil
			}
			// Dead but not yet noticed by the supervisor: wait for it, not in a busy loop.
			wait = l.lost
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, ErrClosed
		case <-wait:
		}
	}
}

// track runs f in a goroutine that Close waits for; false once closed,
// because WaitGroup.Add must not race with Close's Wait.
func (c *Conn) track(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// enter registers a caller-owned goroutine (a Consume call) with Close.
// The caller must call c.wg.Done when it returns.
func (c *Conn) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// sleep waits d; it returns ctx's error or ErrClosed if either ends first.
func (c *Conn) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return ErrClosed
	}
}
