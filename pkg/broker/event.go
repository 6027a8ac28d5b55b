package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
)

// Errors a Publish can wrap. Neither is retried: the broker did receive the
// event and said no.
var (
	// ErrUnroutable: the event was mandatory and no queue is bound for its
	// routing key (basic.return).
	ErrUnroutable = errors.New("broker: unroutable, no queue bound for the routing key")
	// ErrNacked: the broker refused the event (basic.nack), e.g. a queue
	// at its length limit with overflow reject-publish.
	ErrNacked = errors.New("broker: nacked by the broker")
)

const contentType = "application/protobuf"

// Event is one message to publish.
type Event struct {
	// ID becomes message_id and cloudEvents:id; consumers deduplicate on it.
	ID string
	// RoutingKey on the topic exchange, e.g. "token.issued".
	RoutingKey string
	// Time the event occurred: the AMQP timestamp and cloudEvents:time
	// (RFC 3339). Zero means now.
	Time time.Time
	// Message is the body, protobuf-marshalled; its full name is the type
	// property and cloudEvents:type.
	Message proto.Message
	// TraceParent and TraceState are the W3C trace context the event
	// belongs to, when it was written down before it is published (an
	// outbox row, a Redis outbox entry): its publish span continues that
	// trace. Empty: the trace of Publish's ctx.
	TraceParent, TraceState string
}

// outgoing is an Event ready for the wire.
type outgoing struct {
	key  string
	msg  amqp.Publishing
	span trace.Span // the producer span, ended with the event's outcome
	n    int        // its index in the Publish call
}

// encode validates and marshals an event. It runs before anything is sent, so
// a bad event fails the whole call without publishing a part of it.
func (c *Conn) encode(ctx context.Context, e Event) (outgoing, error) {
	if e.ID == "" {
		return outgoing{}, errors.New("broker: event without ID")
	}
	if e.Message == nil {
		return outgoing{}, fmt.Errorf("broker: event %s without Message", e.ID)
	}
	body, err := proto.Marshal(e.Message)
	if err != nil {
		return outgoing{}, fmt.Errorf("broker: event %s: marshal: %w", e.ID, err)
	}
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	typ := string(proto.MessageName(e.Message))
	headers := amqp.Table{
		"cloudEvents:id":          e.ID,
		"cloudEvents:source":      c.o.Source,
		"cloudEvents:type":        typ,
		"cloudEvents:specversion": "1.0",
		"cloudEvents:time":        t.UTC().Format(time.RFC3339Nano),
	}
	span := c.startPublish(ctx, e, headers)
	return outgoing{key: e.RoutingKey, span: span, msg: amqp.Publishing{
		ContentType:  contentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    e.ID,
		Timestamp:    t,
		Type:         typ,
		Body:         body,
		// CloudEvents AMQP protocol binding, binary mode: any consumer can
		// route and decode without our code.
		Headers: headers,
	}}, nil
}
