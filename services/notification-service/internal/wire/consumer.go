package wire

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// tokenEvents is this replica's own server-named queue: every replica sees
// every admission, because the browser may be connected to any of them.
func tokenEvents() broker.QueueSpec {
	return broker.QueueSpec{Bindings: []string{events.RoutingKeyTokenIssued, events.RoutingKeyTokenRestored}, Prefetch: 256}
}

// handle turns a token event into an "admitted" push.
func handle(svc *stream.Service) func(context.Context, broker.Delivery) broker.Result {
	issued := events.TypeName(&waitingroomv1.TokenIssued{})
	restored := events.TypeName(&waitingroomv1.TokenRestored{})
	return func(_ context.Context, d broker.Delivery) broker.Result {
		switch d.Type {
		case issued:
			var e waitingroomv1.TokenIssued
			if proto.Unmarshal(d.Body, &e) != nil {
				return broker.DeadLetter
			}
			svc.Admitted(e.GetQueueId(), e.GetUserId(), e.GetTokenId(), e.GetActivateAt().AsTime(), e.GetExpiresAt().AsTime(), e.GetOccurredAt().AsTime())
		case restored:
			var e waitingroomv1.TokenRestored
			if proto.Unmarshal(d.Body, &e) != nil {
				return broker.DeadLetter
			}
			// A restored token is active again at once.
			at := e.GetOccurredAt().AsTime()
			svc.Admitted(e.GetQueueId(), e.GetUserId(), e.GetTokenId(), minTime(at, time.Now()), e.GetExpiresAt().AsTime(), at)
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
