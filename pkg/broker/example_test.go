package broker_test

import (
	"context"
	"log/slog"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/waitingroom/waitingroom/pkg/broker"
)

// A service wires one Conn, publishes through a Publisher and consumes its
// quorum queue; /readyz calls Healthy.
func Example() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	conn, err := broker.New("amqp://guest:guest@localhost:5672/", broker.Options{Source: "/billing", Log: log})
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		_ = conn.Consume(ctx, broker.QueueSpec{
			Name:       "billing.order-failed", // a downstream team's own queue
			Bindings:   []string{"order.failed"},
			Quorum:     true,
			DeadLetter: true,
		}, func(ctx context.Context, d broker.Delivery) broker.Result {
			// decode d.Body by d.Type, handle idempotently by d.MessageID
			return broker.Ack
		})
	}()

	pub := conn.Publisher()
	err = pub.Publish(ctx, broker.Event{
		ID:         "0190f1c2-token-issued-1",
		RoutingKey: "token.issued",
		Time:       time.Now(),
		Message:    wrapperspb.String("stand-in for a waitingroom.v1 event"),
	})
	_ = err // ErrUnroutable / ErrNacked, or ctx's error while the broker is away
}
