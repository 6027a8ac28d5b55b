package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

var consumerSeq atomic.Uint64

// consumeOnce runs one subscription on its own channel until the channel dies
// (err says why) or ctx ends (nil). subscribed reports whether it got as far
// as basic.consume, so the caller can reset its backoff.
func (c *Conn) consumeOnce(ctx context.Context, l *link, spec QueueSpec, h func(context.Context, Delivery) Result, log *slog.Logger) (subscribed bool, err error) {
	ch, err := l.conn.Channel()
	if err != nil {
		return false, err
	}
	// Closing the channel requeues whatever was delivered and not settled.
	defer ch.Close()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	queue, err := declareQueue(ch, c.o.Exchange, spec)
	if err != nil {
		return false, err
	}
	if err := ch.Qos(spec.Prefetch, 0, false); err != nil {
		return false, err
	}
	tag := fmt.Sprintf("%s#%d", c.o.Source, consumerSeq.Add(1))
	deliveries, err := ch.Consume(queue, tag, false, false, false, false, nil)
	if err != nil {
		return false, err
	}
	log.Info("broker: consuming", "server_queue", queue)

	var wg sync.WaitGroup
	for range spec.Prefetch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range deliveries {
				// After ctx ends the rest of the prefetch is left unsettled:
				// the channel close below requeues it.
				if ctx.Err() == nil {
					settle(d, c.call(ctx, h, d, log), log)
				}
			}
		}()
	}
	workers := make(chan struct{})
	go func() {
		wg.Wait()
		close(workers)
	}()

	select {
	case <-workers: // channel or connection closed, or the server cancelled us (queue deleted)
		err = errors.New("deliveries stopped")
		select {
		case aerr, ok := <-closed:
			if ok && aerr != nil {
				err = aerr
			}
		default:
		}
		return true, err
	case <-ctx.Done():
		// Stop new deliveries, then let running handlers finish and settle.
		if err := ch.Cancel(tag, false); err != nil {
			_ = ch.Close() // ends the deliveries all the same
		}
		<-workers
		return true, nil
	}
}

// declareQueue declares the queue, its DLQ and bindings; it returns the
// queue's name (the server's choice when spec.Name is "").
func declareQueue(ch *amqp.Channel, exchange string, spec QueueSpec) (string, error) {
	if spec.Name == "" {
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			return "", err
		}
		return q.Name, bind(ch, q.Name, exchange, spec.Bindings)
	}
	args := amqp.Table{}
	if spec.Quorum {
		args["x-queue-type"] = "quorum"
		args["x-delivery-limit"] = int64(spec.DeliveryLimit)
	}
	if spec.MessageTTL > 0 {
		args["x-message-ttl"] = spec.MessageTTL.Milliseconds()
	}
	if spec.Expires > 0 {
		args["x-expires"] = spec.Expires.Milliseconds()
	}
	if spec.DeadLetter {
		dlq, dlx := spec.Name+".dlq", exchange+".dlx"
		if _, err := ch.QueueDeclare(dlq, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			return "", err
		}
		if err := ch.QueueBind(dlq, spec.Name, dlx, false, nil); err != nil {
			return "", err
		}
		args["x-dead-letter-exchange"] = dlx
		args["x-dead-letter-routing-key"] = spec.Name
	}
	if _, err := ch.QueueDeclare(spec.Name, true, false, false, false, args); err != nil {
		return "", err
	}
	return spec.Name, bind(ch, spec.Name, exchange, spec.Bindings)
}

func bind(ch *amqp.Channel, queue, exchange string, keys []string) error {
	for _, k := range keys {
		if err := ch.QueueBind(queue, k, exchange, false, nil); err != nil {
			return err
		}
	}
	return nil
}

// call runs the handler; a panic becomes Retry instead of killing the process.
func (c *Conn) call(ctx context.Context, h func(context.Context, Delivery) Result, d amqp.Delivery, log *slog.Logger) (r Result) {
	ctx, span := c.startProcess(ctx, d)
	defer func() {
		if p := recover(); p != nil {
			log.ErrorContext(ctx, "broker: handler panicked, message will be retried", "panic", p,
				"message_id", d.MessageId, "stack", string(debug.Stack()))
			r = Retry
		}
		endProcess(span, r)
	}()
	return h(ctx, toDelivery(d))
}

func settle(d amqp.Delivery, r Result, log *slog.Logger) {
	var err error
	switch r {
	case Ack:
		err = d.Ack(false)
	case DeadLetter:
		err = d.Reject(false)
	default:
		err = d.Nack(false, true)
	}
	if err != nil {
		// The channel is gone; the broker redelivers the message elsewhere.
		log.Debug("broker: settle delivery", "message_id", d.MessageId, "err", err)
	}
}

func toDelivery(d amqp.Delivery) Delivery {
	return Delivery{
		RoutingKey:    d.RoutingKey,
		MessageID:     d.MessageId,
		Type:          d.Type,
		ContentType:   d.ContentType,
		Body:          d.Body,
		Headers:       d.Headers,
		Timestamp:     d.Timestamp,
		Redelivered:   d.Redelivered,
		DeliveryCount: deliveryCount(d.Headers),
	}
}

// deliveryCount reads x-delivery-count, whose integer width depends on the
// broker version.
func deliveryCount(h amqp.Table) int64 {
	switch v := h["x-delivery-count"].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case int:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	}
	return 0
}
