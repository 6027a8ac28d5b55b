package wire

import (
	"context"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/push"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// tokenEvents is this replica's own server-named queue: every replica sees
// every admission, because the browser may be connected to any of them.
func tokenEvents() broker.QueueSpec {
	return broker.QueueSpec{Bindings: []string{events.RoutingKeyTokenIssued, events.RoutingKeyTokensIssued, events.RoutingKeyTokenRestored},
		Prefetch: 256}
}

// The AMQP types of the events that admit people.
var (
	typeIssued   = events.TypeName(&waitingroomv1.TokenIssued{})
	typeBatch    = events.TypeName(&waitingroomv1.TokensIssued{})
	typeRestored = events.TypeName(&waitingroomv1.TokenRestored{})
)

// admissions reads the people a delivery admits: the one of a TokenIssued,
// each of a TokensIssued (the dispatcher's TOKEN_EVENTS=batch); nobody for
// another type. ok is false for a body that does not decode.
func admissions(d broker.Delivery) (tokens []*waitingroomv1.TokenIssued, ok bool) {
	switch d.Type {
	case typeIssued:
		var e waitingroomv1.TokenIssued
		if proto.Unmarshal(d.Body, &e) != nil {
			return nil, false
		}
		return []*waitingroomv1.TokenIssued{&e}, true
	case typeBatch:
		var e waitingroomv1.TokensIssued
		if proto.Unmarshal(d.Body, &e) != nil {
			return nil, false
		}
		return e.GetTokens(), true
	}
	return nil, true
}

// handle turns a token event into an "admitted" push: each person a
// TokenIssued or TokensIssued admits, a TokenRestored.
func handle(svc *stream.Service) func(context.Context, broker.Delivery) broker.Result {
	return func(_ context.Context, d broker.Delivery) broker.Result {
		if d.Type == typeRestored {
			var e waitingroomv1.TokenRestored
			if proto.Unmarshal(d.Body, &e) != nil {
				return broker.DeadLetter
			}
			// A restored token is active again at once.
			at := e.GetOccurredAt().AsTime()
			svc.Admitted(e.GetQueueId(), e.GetUserId(), e.GetTokenId(), minTime(at, time.Now()), e.GetExpiresAt().AsTime(), at)
			return broker.Ack
		}
		tokens, ok := admissions(d)
		if !ok {
			return broker.DeadLetter
		}
		for _, e := range tokens {
			svc.Admitted(e.GetQueueId(), e.GetUserId(), e.GetTokenId(), e.GetActivateAt().AsTime(), e.GetExpiresAt().AsTime(), e.GetOccurredAt().AsTime())
		}
		return broker.Ack
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// pushEvents is the queue the replicas share for Web Push: each TokenIssued
// goes to one of them, which pushes it. A "your turn" later than the
// longest entry is no use, so a message waits at most messageTTL; if push
// is turned off, the queue goes an hour after its last consumer.
func pushEvents(p Push) broker.QueueSpec {
	return broker.QueueSpec{Name: p.Queue, Bindings: []string{events.RoutingKeyTokenIssued, events.RoutingKeyTokensIssued}, Quorum: true,
		DeliveryLimit: 20, Prefetch: p.Concurrency, MessageTTL: 10 * time.Minute, Expires: time.Hour}
}

// pushTurn pushes a TokenIssued, or each token of a TokensIssued (at most
// concurrency at once), to the person's devices. While Redis is not
// answering the event is tried again a second later, up to the queue's
// delivery limit; a token already pushed is not pushed again (ClaimPush).
func pushTurn(svc *push.Service, concurrency int) func(context.Context, broker.Delivery) broker.Result {
	return func(ctx context.Context, d broker.Delivery) broker.Result {
		tokens, ok := admissions(d)
		if !ok {
			return broker.DeadLetter
		}
		var g errgroup.Group
		g.SetLimit(concurrency)
		for _, e := range tokens {
			g.Go(func() error {
				return svc.Issued(ctx, e.GetQueueId(), e.GetUserId(), e.GetTokenId(), e.GetExpiresAt().AsTime())
			})
		}
		if g.Wait() != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			return broker.Retry
		}
		return broker.Ack
	}
}
