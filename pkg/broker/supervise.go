package broker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	// dialTimeout bounds TCP connect plus the AMQP handshake, so a black-holed
	// broker costs one attempt a few seconds, not the library's 30.
	dialTimeout = 5 * time.Second
	// heartbeat detects a silently dead peer (no RST, e.g. a cable cut) in
	// about two intervals.
	heartbeat = 10 * time.Second
)

// parkWait bounds how long a new connection waits for the first attempt
// at the parking queue before publishers and consumers may use it; a
// declaration that hangs (a cluster in trouble) goes on in the background.
const parkWait = 2 * time.Second

// supervise owns the connection: dial, declare, wait for the loss, repeat,
// until Close.
func (c *Conn) supervise() {
	log := c.o.Log.With("exchange", c.o.Exchange)
	failures := 0
	var lostAt time.Time
	for {
		conn, addr, err := c.dial()
		if err == nil {
			if err = declareTopology(conn, c.o.Exchange); err != nil {
				_ = conn.Close()
				err = fmt.Errorf("%s: %w", addr, err)
			}
		}
		if err != nil {
			if c.ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			d := c.o.backoff(failures)
			failures++
			log.Warn("broker: connect failed", "err", err, "attempt", failures, "retry_in", d)
			if c.sleep(c.ctx, d) != nil {
				return
			}
			continue
		}

		// A connection that died between dial and here closes the channel at once.
		closed := conn.NotifyClose(make(chan *amqp.Error, 1))
		l := &link{conn: conn, lost: make(chan struct{})}
		tried := make(chan struct{})
		if !c.track(func() { c.keepParked(l, tried, log) }) {
			_ = conn.Close()
			return
		}
		wait := time.NewTimer(parkWait)
		select {
		case <-tried:
		case <-wait.C:
		case <-c.ctx.Done():
		}
		wait.Stop()
		c.mu.Lock()
		c.link, c.lastErr = l, nil
		close(c.up)
		c.mu.Unlock()
		if lostAt.IsZero() {
			log.Info("broker: connected", "addr", addr)
		} else {
			log.Info("broker: reconnected", "addr", addr, "down_for", time.Since(lostAt).Round(time.Millisecond), "attempts", failures+1)
		}
		failures = 0

		select {
		case aerr := <-closed:
			var err error = errors.New("connection closed")
			if aerr != nil {
				err = aerr
			}
			lostAt = time.Now()
			c.drop(l, err)
			log.Warn("broker: connection lost, reconnecting", "addr", addr, "err", err)
		case <-c.ctx.Done():
			c.drop(l, ErrClosed)
			_ = conn.Close()
			return
		}
	}
}

// drop forgets a dead link and wakes whoever waits on it.
func (c *Conn) drop(l *link, err error) {
	c.mu.Lock()
	c.link, c.lastErr = nil, err
	c.up = make(chan struct{})
	c.mu.Unlock()
	close(l.lost)
}

// dial connects to the first node that answers, starting with c.next and
// going round the list once: after a connection to node i, the next dial
// starts with node i+1, so the node that was just lost (crashed, or
// restarting) is tried last. With every node refusing it returns each
// one's error; the supervisor then backs off before the next round.
func (c *Conn) dial() (*amqp.Connection, string, error) {
	var errs []string
	for range c.urls {
		i := c.next
		c.next = (c.next + 1) % len(c.urls)
		conn, err := c.dialOne(c.urls[i])
		if err == nil {
			return conn, c.addrs[i], nil
		}
		if c.ctx.Err() != nil {
			return nil, "", ErrClosed
		}
		if len(c.urls) == 1 {
			return nil, "", err
		}
		errs = append(errs, c.addrs[i]+": "+err.Error())
	}
	return nil, "", fmt.Errorf("no node answered: %s", strings.Join(errs, "; "))
}

// dialOne connects with a handshake deadline, and aborts as soon as Close
// is called instead of running out the timeout.
func (c *Conn) dialOne(url string) (*amqp.Connection, error) {
	stop := func() bool { return false }
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(c.o.Source)
	cfg := amqp.Config{
		Heartbeat:  heartbeat,
		Locale:     "en_US",
		Properties: props,
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: dialTimeout}
			nc, err := d.DialContext(c.ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The library clears this deadline once the handshake is done.
			if err := nc.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
				_ = nc.Close()
				return nil, err
			}
			stop = context.AfterFunc(c.ctx, func() { _ = nc.Close() })
			return nc, nil
		},
	}
	conn, err := amqp.DialConfig(url, cfg)
	stop()
	return conn, err
}

// declareTopology declares what publishing needs. Declaring is idempotent,
// so it runs on every connect and every new publisher channel: an exchange
// deleted behind our back comes back.
func declareTopology(conn *amqp.Connection, exchange string) error {
	return onChannel(conn, func(ch *amqp.Channel) error { return declareExchanges(ch, exchange) })
}

// onChannel runs f on a channel of its own: a failed declaration closes
// the channel it was made on, never the caller's.
func onChannel(conn *amqp.Connection, f func(*amqp.Channel) error) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return f(ch)
}

// declareExchanges declares the events exchange and its dead-letter
// exchange. Exchanges are cluster metadata, held by every node, so this
// works through any node that is up. The events exchange names its
// alternate exchange "<Exchange>.unrouted" (see declareParking), which
// need not exist yet: until it does, an event no queue is bound for is
// returned (ErrUnroutable) instead of parked.
func declareExchanges(ch *amqp.Channel, exchange string) error {
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, amqp.Table{"alternate-exchange": exchange + UnroutedSuffix}); err != nil {
		return err
	}
	return ch.ExchangeDeclare(exchange+".dlx", amqp.ExchangeTopic, true, false, false, false, nil)
}

// backoff is the delay before retry number attempt (0-based): doubling from
// MinBackoff up to MaxBackoff, then a random half of it taken off so that
// many replicas do not reconnect in lockstep.
func (o *Options) backoff(attempt int) time.Duration {
	d := o.MinBackoff
	for i := 0; i < attempt && d < o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, o.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}
