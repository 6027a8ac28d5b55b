package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Publisher publishes events on its own confirm-mode channel: publisher
// confirms, mandatory, persistent, content_type "application/protobuf",
// type = full message name, message_id = Event.ID, timestamp = Event.Time,
// and the CloudEvents AMQP-binding headers cloudEvents:id, :source, :type,
// :specversion ("1.0") and :time. It is safe for concurrent use.
type Publisher struct {
	c  *Conn
	mu sync.Mutex // guards s
	s  *pubSession
}

// Publisher returns a new Publisher. Its channel is opened on first use and
// reopened after every loss; Close closes it.
func (c *Conn) Publisher() *Publisher { return &Publisher{c: c} }

// Publish publishes all events and returns only after the broker confirmed
// every one of them. An unroutable event gives an error wrapping
// ErrUnroutable, a nacked one ErrNacked (one joined error for all of them;
// the other events are still published; the channel that saw the nack is
// not used again). An event not confirmed when the
// connection or channel is lost is published again on the next one
// (duplicates are possible, loss is not) until ctx ends: then ctx's error.
// Events of one call are pipelined: all are sent, then all confirms awaited.
// After Close it returns ErrClosed.
func (p *Publisher) Publish(ctx context.Context, events ...Event) (err error) {
	todo := make([]outgoing, 0, len(events))
	// Every event's producer span ends with the call: with its own refusal,
	// or with the call's error when it was never confirmed.
	settled := make([]bool, len(events))
	refusals := make([]error, len(events))
	defer func() {
		for _, m := range todo {
			outcome := refusals[m.n]
			if !settled[m.n] {
				outcome = err
			}
			endPublish(m.span, outcome)
		}
	}()
	for i, e := range events {
		m, err := p.c.encode(ctx, e)
		if err != nil {
			return err
		}
		m.n = i
		todo = append(todo, m)
	}
	var errs []error
	for attempt, left := 0, todo; len(left) > 0; attempt++ {
		if attempt > 0 {
			// Usually the wait is for the reconnect in session(); this pause
			// only keeps a channel that dies at once from spinning.
			if err := p.c.sleep(ctx, p.c.o.backoff(attempt-1)); err != nil {
				return err
			}
		}
		s, err := p.session(ctx)
		if err != nil {
			return err
		}
		b := s.publishAll(left)
		select {
		case <-b.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		var again []outgoing
		for i, o := range b.outcomes {
			m := left[i]
			var refused error
			switch o {
			case lost:
				again = append(again, m)
				continue
			case returned:
				refused = fmt.Errorf("event %s (routing key %q): %w", m.msg.MessageId, m.key, ErrUnroutable)
			case nacked:
				refused = fmt.Errorf("event %s (routing key %q): %w", m.msg.MessageId, m.key, ErrNacked)
			}
			settled[m.n], refusals[m.n] = true, refused
			if refused != nil {
				errs = append(errs, refused)
			}
		}
		if len(again) > 0 {
			p.c.o.Log.Warn("broker: publishing unconfirmed events again", "events", len(again), "attempt", attempt+1)
		}
		left = again
	}
	return errors.Join(errs...)
}

// session returns the open channel, opening one on the live connection
// (waiting for it) when there is none.
func (p *Publisher) session(ctx context.Context) (*pubSession, error) {
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		if s := p.s; s != nil && s.usable() {
			p.mu.Unlock()
			return s, nil
		}
		p.mu.Unlock()

		l, err := p.c.current(ctx) // not under p.mu: other callers must still see their ctx
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		s := p.s
		if s == nil || !s.usable() {
			if s != nil {
				// Retired after a nack, or dead already: what it still had
				// in flight is settled lost when it closes, and sent again.
				_ = s.ch.Close()
			}
			if s, err = openSession(p.c, l); err == nil {
				p.s = s
			}
		}
		p.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		p.c.o.Log.Warn("broker: cannot open publisher channel", "err", err, "attempt", attempt+1)
		if err := p.c.sleep(ctx, p.c.o.backoff(attempt)); err != nil {
			return nil, err
		}
	}
}
