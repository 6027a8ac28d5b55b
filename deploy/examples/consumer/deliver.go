package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/events"
	v1 "github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// deliver decodes one delivery, handles it once per event id and settles
// it: ack when handled, a duplicate or a newer event type; reject without
// requeue (to the dead-letter queue) when it will never decode; requeue when
// the handler failed.
func (c *Consumer) deliver(ctx context.Context, d amqp.Delivery) {
	log := c.log.With("id", d.MessageId, "type", d.Type, "routing_key", d.RoutingKey)
	if d.Redelivered {
		c.Stats.Redelivered.Add(1)
	}
	// Decode by the AMQP type property: the full protobuf message name.
	msg, err := events.Decode(d.Type, d.Body)
	switch {
	case errors.Is(err, events.ErrUnknownType) && strings.HasPrefix(d.Type, "waitingroom."):
		// A type added after this code was built, matched by a pattern
		// binding: not for us. Consumers must ignore what they do not know.
		log.Info("ignoring an event type this consumer does not know")
		c.settle(log, d.Ack(false), &c.Stats.Ignored)
		return
	case err != nil:
		log.Error("undecodable delivery: dead-lettering it", "err", err)
		c.settle(log, d.Reject(false), &c.Stats.Rejected)
		return
	}
	if m, ok := msg.(*v1.TokensIssued); ok {
		c.deliverTokens(ctx, log, d, m)
		return
	}
	e := Event{ID: d.MessageId, Type: d.Type, RoutingKey: d.RoutingKey, Message: msg, TraceParent: header(d, "traceparent")}
	if e.ID == "" { // message_id is always set by the waiting room; the body's id is the same
		if m, ok := msg.(interface{ GetEventId() string }); ok {
			e.ID = m.GetEventId()
		}
	}
	if e.ID == "" {
		log.Error("event without an id: cannot be handled idempotently, dead-lettering it")
		c.settle(log, d.Reject(false), &c.Stats.Rejected)
		return
	}
	// The handling finishes even when a stop was asked meanwhile: it is
	// acked right after.
	ran, err := c.store.Once(context.WithoutCancel(ctx), e.ID, func(ctx context.Context) error { return c.handle(ctx, e) })
	switch {
	case err != nil:
		log.Warn("handling failed, requeueing", "err", err)
		c.settle(log, d.Nack(false, true), &c.Stats.Retried)
	case ran:
		c.settle(log, d.Ack(false), &c.Stats.Handled)
	default:
		log.Info("duplicate: handled before, acking")
		c.settle(log, d.Ack(false), &c.Stats.Duplicates)
	}
}

// deliverTokens handles a TokensIssued (the admission-dispatcher's
// TOKEN_EVENTS=batch: a queue's admissions in one message) as the
// TokenIssued events it holds, in their order, each once by its own event
// id: the handler sees the same events as without batch. The message's own
// id is no use for that: a batch published again (a relay that failed
// over) may group the tokens differently. The delivery is acked once every
// token is handled or a duplicate. When one fails, the ones before it stay
// handled (remembered), the rest are not tried, and the delivery is
// requeued: its redelivery skips what was handled.
func (c *Consumer) deliverTokens(ctx context.Context, log *slog.Logger, d amqp.Delivery, m *v1.TokensIssued) {
	tokens := m.GetTokens()
	if len(tokens) == 0 { // the dispatcher never sends one: nothing to do
		log.Warn("a TokensIssued without tokens, acking")
		c.settle(log, d.Ack(false), &c.Stats.Ignored)
		return
	}
	for _, t := range tokens {
		if t.GetEventId() == "" {
			log.Error("a token without an event id: cannot be handled idempotently, dead-lettering the batch")
			c.settle(log, d.Reject(false), &c.Stats.Rejected)
			return
		}
	}
	batch := d.MessageId
	if batch == "" {
		batch = m.GetEventId()
	}
	var handled, duplicates int64
	for _, t := range tokens {
		e := Event{ID: t.GetEventId(), Type: events.TypeName(t), RoutingKey: d.RoutingKey, Batch: batch, Message: t,
			TraceParent: header(d, "traceparent")}
		ran, err := c.store.Once(context.WithoutCancel(ctx), e.ID, func(ctx context.Context) error { return c.handle(ctx, e) })
		switch {
		case err != nil:
			log.Warn("handling a token failed, requeueing the batch", "token_event_id", e.ID, "err", err)
			c.settle(log, d.Nack(false, true), &c.Stats.Retried)
			return
		case ran:
			handled++
		default:
			duplicates++
		}
	}
	if duplicates > 0 {
		log.Info("tokens handled before, skipped", "duplicates", duplicates, "tokens", len(tokens))
	}
	if err := d.Ack(false); err != nil {
		log.Warn("settle the delivery", "err", err)
		return
	}
	c.Stats.Handled.Add(handled)
	c.Stats.Duplicates.Add(duplicates)
}

// settle counts a settled delivery. An ack or reject that fails (the
// channel is gone) is not counted: the broker delivers the event again.
func (c *Consumer) settle(log *slog.Logger, err error, counter *atomic.Int64) {
	if err != nil {
		log.Warn("settle the delivery", "err", err)
		return
	}
	counter.Add(1)
}

// header is a string header of d, "" when it is missing.
func header(d amqp.Delivery, name string) string {
	s, _ := d.Headers[name].(string)
	return s
}
