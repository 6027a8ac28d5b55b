package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/broker/topology"
)

// Result is a handler's verdict on a delivery.
type Result int

const (
	// Ack: done, remove the message.
	Ack Result = iota
	// Retry: nack with requeue; on a quorum queue the delivery limit applies,
	// after which the message is dead-lettered (or dropped without DeadLetter).
	Retry
	// DeadLetter: reject without requeue; the message goes to the DLQ at once
	// (with DeadLetter set; otherwise it is dropped).
	DeadLetter
)

// Delivery is one received message.
type Delivery struct {
	RoutingKey, MessageID, Type, ContentType string
	Body                                     []byte
	Headers                                  map[string]any
	Timestamp                                time.Time
	Redelivered                              bool
	// DeliveryCount is the quorum queue's x-delivery-count header: how many
	// times the message was returned before; 0 on first delivery.
	DeliveryCount int64
}

// QueueSpec describes the queue a Consume or Declare call declares: see
// topology.Queue for its fields. It is that type, so a package can
// describe a queue (pkg/events: the OrderFailed queue) without importing
// the AMQP client.
type QueueSpec = topology.Queue

// checkSpec validates s and fills in its defaults.
func checkSpec(s QueueSpec) (QueueSpec, error) {
	switch {
	case len(s.Bindings) == 0:
		return s, errors.New("broker: QueueSpec needs at least one binding")
	case s.Name == "" && s.DeadLetter:
		return s, errors.New("broker: QueueSpec.DeadLetter needs a Name")
	case len(s.Name) > 200:
		return s, errors.New("broker: QueueSpec.Name longer than 200 bytes")
	case s.MessageTTL < 0 || s.Expires < 0 || (s.MessageTTL > 0 && s.MessageTTL < time.Millisecond) || (s.Expires > 0 && s.Expires < time.Millisecond):
		return s, fmt.Errorf("broker: QueueSpec %q: MessageTTL and Expires must be 0 or at least 1 ms", s.Name)
	case s.DeliveryLimit < 0 || s.Prefetch < 0 || s.Prefetch > 65535:
		return s, fmt.Errorf("broker: QueueSpec: bad DeliveryLimit %d or Prefetch %d", s.DeliveryLimit, s.Prefetch)
	case s.Name != "" && !s.Quorum:
		// A classic queue lives on one node of a cluster: while that node is
		// down its consumers stop and its declaration fails on every connect.
		return s, fmt.Errorf("broker: QueueSpec %q: a named queue must be Quorum (replicated)", s.Name)
	}
	if s.Name == "" {
		s.Quorum = false
	}
	if s.Quorum && s.DeliveryLimit == 0 {
		s.DeliveryLimit = 5
	}
	if s.Prefetch == 0 {
		s.Prefetch = 32
	}
	return s, nil
}

// Consume declares the queue (and its DLQ), binds it and calls h for every
// delivery, with manual acks, until ctx ends or the Conn is closed; it
// survives reconnects (redeclare, rebind, resubscribe). Up to Prefetch calls
// of h run concurrently; their ctx ends with Consume's. A panic in h is
// recovered and counts as Retry. Handlers must be idempotent: redelivery is
// normal. Consume returns nil when ctx ends or the Conn is closed, and an
// error only for a bad spec (including one that conflicts with the existing
// queue's arguments), or ErrClosed when called after Close.
func (c *Conn) Consume(ctx context.Context, spec QueueSpec, h func(context.Context, Delivery) Result) error {
	spec, err := checkSpec(spec)
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("broker: Consume needs a handler")
	}
	if !c.enter() {
		return ErrClosed
	}
	defer c.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()

	log := c.o.Log.With("queue", spec.Name, "bindings", spec.Bindings)
	for attempt := 0; ; attempt++ {
		l, err := c.current(ctx)
		if err != nil {
			return nil // ctx ended or Close
		}
		subscribed, err := c.consumeOnce(ctx, l, spec, h, log)
		if ctx.Err() != nil {
			return nil
		}
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
			return fmt.Errorf("broker: declare queue %q: %w", spec.Name, err)
		}
		if subscribed {
			attempt = 0
		}
		d := c.o.backoff(attempt)
		log.Warn("broker: consumer interrupted, subscribing again", "err", err, "retry_in", d)
		if c.sleep(ctx, d) != nil {
			return nil
		}
	}
}
