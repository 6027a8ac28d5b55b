// Package events ties the protobuf event types of waitingroom.v1 to RabbitMQ:
// the exchange they are published to, the routing key of each type, and the
// AMQP type property (the full message name) a consumer decodes a body by.
//
// The contract itself is proto/waitingroom/v1/events.proto; docs/EVENTS.md
// describes it for downstream teams.
package events

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
)

// ExchangeName is the durable topic exchange every event is published to.
const ExchangeName = "waitingroom.events"

// Routing keys, one per event type. Consumers bind with them or with
// patterns such as "token.*".
const (
	RoutingKeyTokenIssued   = "token.issued"
	RoutingKeyTokensIssued  = "tokens.issued"
	RoutingKeyTokenRestored = "token.restored"
	RoutingKeyTokenExpired  = "token.expired"
	RoutingKeyOrderCreated  = "order.created"
	RoutingKeyOrderFailed   = "order.failed"
	RoutingKeyQueueStarted  = "queue.started"
	RoutingKeyQueueDrawn    = "queue.drawn"
	RoutingKeyOrderHealth   = "order.health"
	RoutingKeyUserAbandoned = "user.abandoned"
	RoutingKeyQueueChanged  = "queue.changed"
	RoutingKeyQueueMinute   = "queue.minute"
)

// ErrUnknownType is returned (wrapped) for a message or type name that is not
// one of the waitingroom.v1 events. A consumer should dead-letter such a
// delivery rather than requeue it: it will never decode.
var ErrUnknownType = errors.New("events: unknown event type")

// event is what this package knows about one event type.
type event struct {
	routingKey string
	typ        protoreflect.MessageType
}

// registry maps each event's full message name to its routing key and Go
// type. It is built from the generated types, so a renamed message cannot
// drift from it silently; TestEveryMessageIsRegistered catches a message
// added to the .proto but not here.
var registry = func() map[protoreflect.FullName]event {
	r := make(map[protoreflect.FullName]event)
	for _, e := range []struct {
		m   proto.Message
		key string
	}{
		{&waitingroomv1.TokenIssued{}, RoutingKeyTokenIssued},
		{&waitingroomv1.TokensIssued{}, RoutingKeyTokensIssued},
		{&waitingroomv1.TokenRestored{}, RoutingKeyTokenRestored},
		{&waitingroomv1.TokenExpired{}, RoutingKeyTokenExpired},
		{&waitingroomv1.OrderCreated{}, RoutingKeyOrderCreated},
		{&waitingroomv1.OrderFailed{}, RoutingKeyOrderFailed},
		{&waitingroomv1.QueueStarted{}, RoutingKeyQueueStarted},
		{&waitingroomv1.QueueDrawn{}, RoutingKeyQueueDrawn},
		{&waitingroomv1.OrderHealth{}, RoutingKeyOrderHealth},
		{&waitingroomv1.UserAbandoned{}, RoutingKeyUserAbandoned},
		{&waitingroomv1.QueueChanged{}, RoutingKeyQueueChanged},
		{&waitingroomv1.QueueMinute{}, RoutingKeyQueueMinute},
	} {
		t := e.m.ProtoReflect().Type()
		r[t.Descriptor().FullName()] = event{routingKey: e.key, typ: t}
	}
	return r
}()

// TypeName returns m's full protobuf name, e.g. "waitingroom.v1.TokenIssued":
// the AMQP type property and cloudEvents:type header of the message. It
// returns "" for nil.
func TypeName(m proto.Message) string {
	return string(proto.MessageName(m))
}

// RoutingKey returns the routing key m is published with. It fails with
// ErrUnknownType for nil and for messages that are not events.
func RoutingKey(m proto.Message) (string, error) {
	e, ok := registry[proto.MessageName(m)]
	if !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownType, TypeName(m))
	}
	return e.routingKey, nil
}

// RoutingKeys returns the routing key of every event type, sorted: exactly
// the channels of proto/asyncapi.yaml, and every key a consumer can bind.
func RoutingKeys() []string {
	keys := make([]string, 0, len(registry))
	for _, e := range registry {
		keys = append(keys, e.routingKey)
	}
	slices.Sort(keys)
	return keys
}

// Decode unmarshals the body of a delivery whose AMQP type property is
// typeName into a new message of that type, e.g. a *waitingroomv1.TokenIssued
// for "waitingroom.v1.TokenIssued". Fields the type does not know are kept as
// unknown fields, so a consumer built before a field was added still decodes
// newer events. A typeName that is not an event fails with ErrUnknownType.
func Decode(typeName string, body []byte) (proto.Message, error) {
	e, ok := registry[protoreflect.FullName(typeName)]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, typeName)
	}
	m := e.typ.New().Interface()
	if err := proto.Unmarshal(body, m); err != nil {
		return nil, fmt.Errorf("events: decode %s: %w", typeName, err)
	}
	return m, nil
}
