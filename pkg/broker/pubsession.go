package broker

import (
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// outcome is what became of one published event.
type outcome uint8

const (
	waiting  outcome = iota
	acked            // confirmed
	nacked           // basic.nack
	returned         // basic.return, then confirmed
	lost             // the channel died first: publish again
)

// batch collects the outcomes of one Publish attempt.
type batch struct {
	mu       sync.Mutex
	outcomes []outcome
	left     int
	done     chan struct{} // closed when no outcome is waiting
}

func newBatch(n int) *batch {
	b := &batch{outcomes: make([]outcome, n), left: n, done: make(chan struct{})}
	if n == 0 {
		close(b.done)
	}
	return b
}

// settle records an outcome; the first one wins, because the publisher and
// the dispatcher may both give up on the same event when the channel dies.
func (b *batch) settle(i int, o outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.outcomes[i] != waiting {
		return
	}
	b.outcomes[i] = o
	if b.left--; b.left == 0 {
		close(b.done)
	}
}

type inflight struct {
	b  *batch
	i  int
	id string
}

// pubSession is one confirm-mode channel of a Publisher.
type pubSession struct {
	ch       *amqp.Channel
	exchange string
	pubMu    sync.Mutex // serialises "next delivery tag" with the basic.publish that takes it

	mu       sync.Mutex // guards the fields below; never held across a library call
	dead     bool
	inflight map[uint64]inflight // by delivery tag
	returned map[string]int      // message ids returned and not yet confirmed
}

// openSession opens a confirm-mode channel and starts its dispatcher, which
// Close waits for (it ends when the channel closes).
func openSession(c *Conn, l *link) (*pubSession, error) {
	ch, err := l.conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := declareExchanges(ch, c.o.Exchange); err != nil {
		_ = ch.Close()
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	s := &pubSession{ch: ch, exchange: c.o.Exchange,
		inflight: map[uint64]inflight{}, returned: map[string]int{}}
	// Unbuffered on purpose: the library's reader blocks until the dispatcher
	// has taken the return, and only then reads the ack that follows it, so
	// the dispatcher always sees a message's return before its confirm.
	returns := ch.NotifyReturn(make(chan amqp.Return))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1024))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if !c.track(func() {
		s.dispatch(returns, confirms)
		// A channel error on a live connection (e.g. 404, exchange deleted) is
		// worth a line; a lost connection was logged by the supervisor.
		if err, ok := <-closed; ok && err != nil && !l.conn.IsClosed() {
			c.o.Log.Warn("broker: publisher channel closed by the broker", "err", err)
		}
	}) {
		_ = ch.Close()
		return nil, ErrClosed
	}
	return s, nil
}

// usable reports whether new events may go to this session.
func (s *pubSession) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead && !s.ch.IsClosed()
}

// publishAll sends the events (mandatory) without waiting; the returned
// batch completes as confirms arrive or the channel dies.
func (s *pubSession) publishAll(todo []outgoing) *batch {
	b := newBatch(len(todo))
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	for i, m := range todo {
		tag := s.ch.GetNextPublishSeqNo()
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			settleFrom(b, i, lost)
			return b
		}
		// Registered before the publish: the confirm may beat us back.
		s.inflight[tag] = inflight{b: b, i: i, id: m.msg.MessageId}
		s.mu.Unlock()
		if err := s.ch.Publish(s.exchange, m.key, true, false, m.msg); err != nil {
			s.mu.Lock()
			delete(s.inflight, tag)
			s.mu.Unlock()
			// The channel or connection is gone (our events are always valid):
			// force a new session and publish the rest there.
			_ = s.ch.Close()
			settleFrom(b, i, lost)
			return b
		}
	}
	return b
}

func settleFrom(b *batch, from int, o outcome) {
	for i := from; i < len(b.outcomes); i++ {
		b.settle(i, o)
	}
}

// dispatch turns returns and confirms into outcomes until the channel
// closes, then declares everything still unconfirmed lost.
func (s *pubSession) dispatch(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation) {
	for returns != nil || confirms != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			s.mu.Lock()
			s.returned[r.MessageId]++
			s.mu.Unlock()
		case cf, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			s.confirm(cf)
		}
	}
	s.mu.Lock()
	s.dead = true
	left := s.inflight
	s.inflight = nil
	s.mu.Unlock()
	for _, f := range left {
		f.b.settle(f.i, lost)
	}
}

func (s *pubSession) confirm(cf amqp.Confirmation) {
	s.mu.Lock()
	f, ok := s.inflight[cf.DeliveryTag]
	delete(s.inflight, cf.DeliveryTag)
	o := acked
	switch {
	case !ok:
	case !cf.Ack:
		o = nacked
		// No more events on this channel: RabbitMQ 3.10 can nack every
		// later publish of a channel that began publishing to a quorum
		// queue while the queue elected a new leader (seen on a node
		// crash: nacks for as long as the channel lived), while a new
		// channel is acked as soon as the leader is known. The Publisher
		// opens a new one and closes this one.
		s.dead = true
	case s.returned[f.id] > 0:
		o = returned
		if s.returned[f.id]--; s.returned[f.id] == 0 {
			delete(s.returned, f.id)
		}
	}
	s.mu.Unlock()
	if ok {
		f.b.settle(f.i, o)
	}
}
