package events

import "github.com/waitingroom/waitingroom/pkg/broker/topology"

// OrderFailedQueue is the queue OrderFailed is consumed from, for the
// dispatcher that consumes it and for the order-service that declares it
// too (so a failure published before the dispatcher's first start waits for
// it): durable, quorum, shared by every replica, with a dead-letter queue for
// poison messages. Both sides must use the same name and delivery limit, or
// the broker refuses the second declaration: they embed config.OrderFailed
// (ORDER_FAILED_QUEUE, ORDER_FAILED_DELIVERY_LIMIT) and build the queue
// here. The result is a broker.QueueSpec.
func OrderFailedQueue(name string, deliveryLimit int) topology.Queue {
	return topology.Queue{
		Name:          name,
		Bindings:      []string{RoutingKeyOrderFailed},
		Quorum:        true,
		DeliveryLimit: deliveryLimit,
		DeadLetter:    true,
		Prefetch:      64,
	}
}
