package testenv

import (
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

// DeleteAMQPTopology removes what a test declared on the shared broker: the
// named queues, and the exchange with its dead-letter and alternate
// ("unrouted") exchanges and parking queue (and the classic parking queue
// of earlier versions, should one be left). Errors are ignored: cleanup is
// best effort and the names are unique per test. url may be a
// comma-separated list (a cluster): the first node that answers will do.
func DeleteAMQPTopology(url, exchange string, queues ...string) {
	var c *amqp.Connection
	var err error
	for _, u := range strings.Split(url, ",") {
		if c, err = amqp.Dial(u); err == nil {
			break
		}
	}
	if err != nil {
		return
	}
	defer c.Close()
	for _, q := range append(queues, exchange+broker.ParkedSuffix, exchange+broker.UnroutedSuffix) {
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(q, false, false, false)
			_ = ch.Close()
		}
	}
	for _, x := range []string{exchange, exchange + ".dlx", exchange + broker.UnroutedSuffix} {
		if ch, err := c.Channel(); err == nil {
			_ = ch.ExchangeDelete(x, false, false)
			_ = ch.Close()
		}
	}
}
