package wire

import (
	"context"
	"log/slog"

	"google.golang.org/protobuf/proto"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/events/waitingroomv1"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
)

// healthReports is this replica's own server-named queue for the
// order-service's health reports: every replica sees every report, so
// whichever leads a queue (now or after a failover) steers it from the
// same picture. It is bound even with no ADAPTIVE queue, so the reports
// never pile up as unroutable.
func healthReports() broker.QueueSpec {
	return broker.QueueSpec{Bindings: []string{events.RoutingKeyOrderHealth}, Prefetch: 256}
}

// healthConsumer hands each report to the dispatcher's rate controllers. A
// report is only worth something now: anything that is not one is dropped,
// never retried.
func healthConsumer(d *dispatch.Dispatcher, log *slog.Logger) func(context.Context, broker.Delivery) broker.Result {
	typ := events.TypeName(&waitingroomv1.OrderHealth{})
	return func(_ context.Context, del broker.Delivery) broker.Result {
		var m waitingroomv1.OrderHealth
		if del.Type != typ || proto.Unmarshal(del.Body, &m) != nil {
			log.Warn("dropped a message on the health queue that is not an OrderHealth", "type", del.Type, "message_id", del.MessageID)
			return broker.DeadLetter
		}
		d.ObserveHealth(events.HealthFrom(&m))
		return broker.Ack
	}
}
