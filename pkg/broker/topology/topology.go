// Package topology describes RabbitMQ queues as plain values, apart from
// the client that declares them: pkg/events says which queue OrderFailed
// is consumed from without importing amqp091-go, and pkg/broker, which
// knows the AMQP arguments, declares what it is given.
package topology

import "time"

// Queue describes a queue: its name, what it is bound to, and how it
// treats messages that keep failing. broker.QueueSpec is this type.
type Queue struct {
	// Name of the queue; "" means a server-named, exclusive, auto-delete
	// queue (each replica its own: fan-out). Such a queue lives as long as
	// the connection: events published while reconnecting are not seen.
	Name string
	// Bindings are routing-key patterns on the exchange. At least one.
	Bindings []string
	// Quorum makes it a durable quorum queue (x-queue-type quorum),
	// replicated over the nodes of a cluster. Required for a named queue:
	// a classic one would live on one node, and while that node is down
	// its consumers would stop. Ignored for Name == "".
	Quorum bool
	// DeliveryLimit is the quorum x-delivery-limit, default 5 when Quorum:
	// a message returned more often is dead-lettered.
	DeliveryLimit int
	// DeadLetter declares "<Name>.dlq" (quorum, durable) bound to
	// "<Exchange>.dlx" with key <Name>, and points the queue's
	// x-dead-letter-exchange / x-dead-letter-routing-key there.
	DeadLetter bool
	// Prefetch is basic.qos and the number of concurrent handler calls;
	// default 32.
	Prefetch int
	// MessageTTL (x-message-ttl), when set, drops a message that waited
	// longer in the queue: for events that are worthless late.
	MessageTTL time.Duration
	// Expires (x-expires), when set, deletes the queue once it has had no
	// consumer for this long: for a queue of a feature that may be turned
	// off, which would otherwise fill up unread. Ignored for Name == "".
	Expires time.Duration
}
