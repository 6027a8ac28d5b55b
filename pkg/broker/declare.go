package broker

import (
	"context"
	"errors"
	"fmt"
)

// Declare declares a durable queue (and its dead-letter queue) with its
// bindings, without consuming from it. A producer calls it for the queue of
// a consumer it depends on, so events published before that consumer's
// first start are queued for it rather than parked as unrouted. The spec
// must be the consumer's own (the broker refuses a conflicting one).
func (c *Conn) Declare(ctx context.Context, spec QueueSpec) error {
	if spec.Name == "" {
		return errors.New("broker: Declare needs a queue name")
	}
	spec, err := checkSpec(spec)
	if err != nil {
		return err
	}
	l, err := c.current(ctx)
	if err != nil {
		return err
	}
	ch, err := l.conn.Channel()
	if err != nil {
		return fmt.Errorf("broker: declare %s: %w", spec.Name, err)
	}
	defer ch.Close()
	if _, err := declareQueue(ch, c.o.Exchange, spec); err != nil {
		return fmt.Errorf("broker: declare %s: %w", spec.Name, err)
	}
	return nil
}
