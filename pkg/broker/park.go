package broker

import (
	"errors"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const (
	// UnroutedSuffix names the alternate exchange of the events exchange,
	// "<Exchange>.unrouted" (fanout): it receives every event no queue is
	// bound for. Before the parking queue was a quorum queue, a classic
	// queue of the same name held them (see retireClassicParking).
	UnroutedSuffix = ".unrouted"
	// ParkedSuffix names the quorum queue bound to the alternate exchange,
	// "<Exchange>.parked", that keeps those events (the newest
	// unroutedMax): a routing key no team subscribes to, a consumer not
	// deployed yet. A returned event would stay in its outbox and hold
	// back every event behind it.
	ParkedSuffix = ".parked"
)

// unroutedMax bounds the parking queue; the oldest events go first
// (drop-head: quorum queues support it, not reject-publish-dlx).
const unroutedMax = 100_000

// parkRetryMin and parkRetryMax bound the wait between two attempts at
// the parking declarations: often enough to notice a node that came back,
// seldom enough not to flood the log while it stays away.
const parkRetryMin, parkRetryMax = time.Second, 10 * time.Second

// keepParked declares the parking topology on l (declareParking) until it
// succeeds, the link is lost or the Conn closed; it closes tried after the
// first attempt, whatever its outcome. The supervisor waits for that
// attempt (at most parkWait) and no more: the parking queue only matters
// for events no queue is bound for, so while it cannot be declared
// publishing and consuming go on, and it is tried again later.
func (c *Conn) keepParked(l *link, tried chan<- struct{}, log *slog.Logger) {
	o := c.o
	o.MinBackoff, o.MaxBackoff = max(o.MinBackoff, parkRetryMin), max(o.MaxBackoff, parkRetryMax)
	for attempt := 0; ; attempt++ {
		err := declareParking(l.conn, c.o.Exchange, log)
		if attempt == 0 {
			close(tried)
		}
		if err == nil {
			if attempt > 0 {
				log.Info("broker: parking queue declared", "attempts", attempt+1)
			}
			return
		}
		d := o.backoff(attempt)
		log.Warn("broker: cannot declare the parking queue for unrouted events; publishing and consuming go on without it",
			"err", err, "attempt", attempt+1, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-l.lost:
			t.Stop()
			return
		case <-c.ctx.Done():
			t.Stop()
			return
		}
	}
}

// declareParking declares the alternate exchange "<Exchange>.unrouted",
// the quorum queue "<Exchange>.parked" (replicated: no single node's loss
// makes it, or its declaration, unavailable) and its binding, then retires
// the classic parking queue of earlier versions.
func declareParking(conn *amqp.Connection, exchange string, log *slog.Logger) error {
	ae, parked := exchange+UnroutedSuffix, exchange+ParkedSuffix
	err := onChannel(conn, func(ch *amqp.Channel) error {
		if err := ch.ExchangeDeclare(ae, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return err
		}
		if _, err := ch.QueueDeclare(parked, true, false, false, false, amqp.Table{
			amqp.QueueTypeArg: amqp.QueueTypeQuorum, amqp.QueueMaxLenArg: int64(unroutedMax), amqp.QueueOverflowArg: amqp.QueueOverflowDropHead,
		}); err != nil {
			return err
		}
		return ch.QueueBind(parked, "", ae, false, nil)
	})
	if err != nil {
		return err
	}
	return retireClassicParking(conn, exchange, log)
}

// retireClassicParking removes the classic queue "<Exchange>.unrouted"
// that parked unrouted events before (its name is the alternate
// exchange's), once the quorum queue is bound in its place, so no event
// goes unparked in between. Empty (or absent), it is deleted. Holding
// events, it is unbound, so it gets no more, and left for an operator to
// read and delete, with a warning on every connect. While its home node is
// down neither is possible (404 NOT_FOUND): the error makes keepParked try
// again later. A replica of an earlier version still running declares and
// binds it again on its next connect; a later connect of a replica of this
// one removes it again.
func retireClassicParking(conn *amqp.Connection, exchange string, log *slog.Logger) error {
	old := exchange + UnroutedSuffix
	err := onChannel(conn, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(old, false, true, false)
		return err
	})
	var aerr *amqp.Error
	if !errors.As(err, &aerr) || aerr.Code != amqp.PreconditionFailed {
		return err // nil: deleted, or never there
	}
	if err := onChannel(conn, func(ch *amqp.Channel) error { return ch.QueueUnbind(old, "", old, nil) }); err != nil {
		return err
	}
	log.Warn("broker: the classic queue that parked unrouted events before this version still holds events; it gets no more (they go to the quorum queue): read or move them, then delete it",
		"queue", old, "parked", exchange+ParkedSuffix)
	return nil
}
