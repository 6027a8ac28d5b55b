package testenv

import (
	amqp "github.com/rabbitmq/amqp091-go"
)

// DeleteAMQPTopology removes what a test declared on the shared broker: the
// named queues, and the exchange with its dead-letter and alternate
// ("unrouted") exchanges and parking queue. Errors are ignored: cleanup is
// best effort and the names are unique per test.
func DeleteAMQPTopology(url, exchange string, queues ...string) {
	c, err := amqp.Dial(url)
	if err != nil {
		return
	}
	defer c.Close()
	for _, q := range append(queues, exchange+".unrouted") {
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(q, false, false, false)
			_ = ch.Close()
		}
	}
	for _, x := range []string{exchange, exchange + ".dlx", exchange + ".unrouted"} {
		if ch, err := c.Channel(); err == nil {
			_ = ch.ExchangeDelete(x, false, false)
			_ = ch.Close()
		}
	}
}
