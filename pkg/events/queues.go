package events

import "github.com/waitingroom/waitingroom/pkg/broker"

// DefaultOrderFailedQueue is the admission-dispatcher's quorum queue for
// OrderFailed.
const DefaultOrderFailedQueue = "admission-dispatcher.order-failed"

// OrderFailedQueue is the spec of the queue OrderFailed is consumed from, for
// the dispatcher that consumes it and for the order-service that declares it
// too (so a failure published before the dispatcher's first start waits for
// it): durable, quorum, shared by every replica, with a dead-letter queue for
// poison messages. Both sides must use the same name and delivery limit
// (ORDER_FAILED_QUEUE, ORDER_FAILED_DELIVERY_LIMIT).
func OrderFailedQueue(name string, deliveryLimit int) broker.QueueSpec {
	return broker.QueueSpec{
		Name:          name,
		Bindings:      []string{RoutingKeyOrderFailed},
		Quorum:        true,
		DeliveryLimit: deliveryLimit,
		DeadLetter:    true,
		Prefetch:      64,
	}
}
