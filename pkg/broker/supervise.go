package broker

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
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

// supervise owns the connection: dial, declare, wait for the loss, repeat,
// until Close.
func (c *Conn) supervise() {
	log := c.o.Log.With("exchange", c.o.Exchange)
	failures := 0
	var lostAt time.Time
	for {
		conn, err := c.dial()
		if err == nil {
			if err = declareTopology(conn, c.o.Exchange); err != nil {
				_ = conn.Close()
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
		c.mu.Lock()
		c.link, c.lastErr = l, nil
		close(c.up)
		c.mu.Unlock()
		if lostAt.IsZero() {
			log.Info("broker: connected")
		} else {
			log.Info("broker: reconnected", "down_for", time.Since(lostAt).Round(time.Millisecond), "attempts", failures+1)
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
			log.Warn("broker: connection lost, reconnecting", "err", err)
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

// dial connects with a handshake deadline, and aborts as soon as Close is
// called instead of running out the timeout.
func (c *Conn) dial() (*amqp.Connection, error) {
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
	conn, err := amqp.DialConfig(c.url, cfg)
	stop()
	return conn, err
}

// declareTopology declares the events exchange and its dead-letter exchange.
// Declaring is idempotent, so it runs on every connect and every new
// publisher channel: an exchange deleted behind our back comes back.
func declareTopology(conn *amqp.Connection, exchange string) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return declareExchanges(ch, exchange)
}

// UnroutedSuffix names the alternate exchange and queue that keep events
// no queue is bound for: "<Exchange>.unrouted".
const UnroutedSuffix = ".unrouted"

// unroutedMax bounds the parking queue; the oldest events go first.
const unroutedMax = 100_000

// declareExchanges declares the events exchange with an alternate exchange.
// An event nobody has bound a queue for yet (a routing key no team
// subscribes to, a consumer not deployed yet) is parked in
// "<Exchange>.unrouted" instead of being returned: a returned event would
// stay in its outbox and hold back every event behind it.
func declareExchanges(ch *amqp.Channel, exchange string) error {
	unrouted := exchange + UnroutedSuffix
	if err := ch.ExchangeDeclare(unrouted, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(unrouted, true, false, false, false, amqp.Table{
		"x-max-length": int64(unroutedMax), "x-overflow": "drop-head",
	}); err != nil {
		return err
	}
	if err := ch.QueueBind(unrouted, "", unrouted, false, nil); err != nil {
		return err
	}
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, amqp.Table{"alternate-exchange": unrouted}); err != nil {
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
