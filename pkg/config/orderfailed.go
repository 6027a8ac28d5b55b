package config

import "errors"

// OrderFailed names the admission-dispatcher's OrderFailed queue. The
// order-service declares the queue too, so a failure published before the
// dispatcher's first start waits for it; the broker refuses a declaration
// that differs from the first, so both services embed this one struct and
// build the queue with events.OrderFailedQueue.
type OrderFailed struct {
	// OrderFailedQueue is the quorum queue OrderFailed is consumed from;
	// its dead-letter queue is the same name plus ".dlq".
	OrderFailedQueue string `env:"ORDER_FAILED_QUEUE" envDefault:"admission-dispatcher.order-failed"`
	// OrderFailedDeliveryLimit is how often one OrderFailed is delivered
	// before it is dead-lettered. The dispatcher and the order-service
	// must agree: the broker refuses a declaration that differs.
	OrderFailedDeliveryLimit int `env:"ORDER_FAILED_DELIVERY_LIMIT" envDefault:"20"`
}

// Check reports a missing queue name or a delivery limit below one.
func (o OrderFailed) Check() error {
	if o.OrderFailedQueue == "" || o.OrderFailedDeliveryLimit < 1 {
		return errors.New("ORDER_FAILED_QUEUE must be set and ORDER_FAILED_DELIVERY_LIMIT positive")
	}
	return nil
}
