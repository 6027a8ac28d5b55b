package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"google.golang.org/protobuf/proto"
)

// maxBackoff bounds the wait between two reconnection attempts.
const maxBackoff = 30 * time.Second

// Config is what the consumer needs; main fills it from flags.
type Config struct {
	URL      string   // AMQP URL, with credentials: never logged
	Exchange string   // the waiting room's topic exchange, waitingroom.events
	Queue    string   // your durable queue, named after your service
	Bindings []string // routing keys or patterns, e.g. order.* or token.issued,tokens.issued
	Prefetch int      // deliveries the broker sends ahead of the acks
	Backoff  time.Duration
}

// Event is one decoded delivery, as a Handler gets it; a TokensIssued (the
// batch form of token.issued) is one Event per token, each a TokenIssued.
type Event struct {
	ID         string        // the event id: message_id, equal to the body's event_id; a token's own event_id
	Type       string        // the AMQP type property, e.g. waitingroom.v1.OrderCreated; a token's waitingroom.v1.TokenIssued
	RoutingKey string        // e.g. order.created; tokens.issued for a token of a TokensIssued
	Batch      string        // for a token of a TokensIssued, that message's id; "" otherwise
	Message    proto.Message // the generated type, e.g. *waitingroomv1.OrderCreated
	// TraceParent is the W3C traceparent header: the producer's span. With
	// OpenTelemetry, start your span as its child (propagation.TraceContext
	// reads the headers as they are); "" when the producer had no trace.
	TraceParent string
}

// Handler does the consumer's work for one event. It runs once per event id
// (see Store); an error leaves the event unremembered and requeues it.
type Handler func(ctx context.Context, e Event) error

// Stats counts what happened to the deliveries. Handled and Duplicates
// count events, each token of an acked TokensIssued as one; the others
// count deliveries.
type Stats struct {
	Handled     atomic.Int64 // handled and acked
	Duplicates  atomic.Int64 // acked without handling: the id was handled before
	Ignored     atomic.Int64 // acked without handling: an event type newer than this code
	Rejected    atomic.Int64 // rejected without requeue (dead-lettered): will never decode
	Retried     atomic.Int64 // requeued after the handler failed
	Redelivered atomic.Int64 // deliveries the broker marked as redelivered
}

// Consumer consumes the events of its queue until its context ends,
// reconnecting whenever the connection is lost.
type Consumer struct {
	cfg    Config
	store  Store
	handle Handler
	log    *slog.Logger
	tag    string // the consumer tag, to cancel the subscription at a stop
	Stats  Stats

	// dial opens the TCP connection; nil is amqp091's. Tests cut the
	// connection through it.
	dial func(network, addr string) (net.Conn, error)
}

// NewConsumer checks cfg and returns a Consumer; Run starts it.
func NewConsumer(cfg Config, store Store, handle Handler, log *slog.Logger) (*Consumer, error) {
	switch {
	case cfg.URL == "" || cfg.Exchange == "" || cfg.Queue == "":
		return nil, errors.New("consumer: URL, exchange and queue are required")
	case len(cfg.Bindings) == 0:
		return nil, errors.New("consumer: bind at least one routing key")
	case cfg.Prefetch < 1:
		return nil, fmt.Errorf("consumer: prefetch %d, want at least 1", cfg.Prefetch)
	case store == nil || handle == nil || log == nil:
		return nil, errors.New("consumer: store, handler and logger are required")
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &Consumer{cfg: cfg, store: store, handle: handle, log: log, tag: cfg.Queue + "-" + hex.EncodeToString(b)}, nil
}

// Run consumes until ctx ends, then stops gracefully: it cancels the
// subscription, lets the event in hand finish and be acked, and closes the
// connection (deliveries sent ahead and not acked go back to the queue). A
// lost connection is redialled after Backoff, doubling up to 30 s.
func (c *Consumer) Run(ctx context.Context) error {
	backoff := c.cfg.Backoff
	for {
		subscribed, err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if subscribed {
			backoff = c.cfg.Backoff // it worked for a while: start over
		}
		c.log.Warn("connection lost, reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session is one connection: it declares and binds the queue, subscribes and
// handles deliveries until ctx ends or the connection or channel is lost.
// amqp091-go does not reconnect by itself; Run calls session again.
func (c *Consumer) session(ctx context.Context) (subscribed bool, err error) {
	conn, err := amqp.DialConfig(c.cfg.URL, amqp.Config{
		Dial:       c.dial,
		Properties: amqp.Table{"connection_name": "waitingroom-example-consumer " + c.cfg.Queue},
	})
	if err != nil {
		return false, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	connLost := conn.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("channel: %w", err)
	}
	chLost := ch.NotifyClose(make(chan *amqp.Error, 1))
	deliveries, err := c.subscribe(ch)
	if err != nil {
		return false, err
	}
	c.log.Info("consuming", "queue", c.cfg.Queue, "exchange", c.cfg.Exchange, "bindings", strings.Join(c.cfg.Bindings, ","))
	for {
		select {
		case <-ctx.Done():
			if err := ch.Cancel(c.tag, false); err != nil {
				c.log.Warn("cancel the subscription", "err", err)
			}
			return true, nil
		case err := <-connLost:
			return true, fmt.Errorf("connection closed: %v", err)
		case err := <-chLost:
			return true, fmt.Errorf("channel closed: %v", err)
		case d, ok := <-deliveries:
			if !ok {
				return true, errors.New("subscription ended")
			}
			c.deliver(ctx, d)
		}
	}
}

// subscribe declares the topology (all idempotent, so every reconnection
// does it again) and starts consuming with manual acks.
func (c *Consumer) subscribe(ch *amqp.Channel) (<-chan amqp.Delivery, error) {
	// The exchange is the waiting room's (it declares it with arguments of
	// its own, an alternate exchange, which a declaration here would have
	// to repeat exactly): only check that it is there. Until it is, Run
	// retries.
	if err := ch.ExchangeDeclarePassive(c.cfg.Exchange, "topic", true, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("exchange %s (is the waiting room deployed?): %w", c.cfg.Exchange, err)
	}
	// Poison messages go to <queue>.dead for a person to look at.
	dead := c.cfg.Queue + ".dead"
	if _, err := ch.QueueDeclare(dead, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		return nil, fmt.Errorf("declare queue %s: %w", dead, err)
	}
	args := amqp.Table{
		"x-queue-type":              "quorum", // replicated, survives a broker node
		"x-dead-letter-exchange":    "",       // the default exchange routes by queue name
		"x-dead-letter-routing-key": dead,
		"x-delivery-limit":          int32(10), // an event that always fails ends in dead, not in a loop
	}
	if _, err := ch.QueueDeclare(c.cfg.Queue, true, false, false, false, args); err != nil {
		return nil, fmt.Errorf("declare queue %s: %w", c.cfg.Queue, err)
	}
	for _, key := range c.cfg.Bindings {
		if err := ch.QueueBind(c.cfg.Queue, key, c.cfg.Exchange, false, nil); err != nil {
			return nil, fmt.Errorf("bind %s to %s: %w", key, c.cfg.Queue, err)
		}
	}
	if err := ch.Qos(c.cfg.Prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("prefetch: %w", err)
	}
	d, err := ch.Consume(c.cfg.Queue, c.tag, false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", c.cfg.Queue, err)
	}
	return d, nil
}
