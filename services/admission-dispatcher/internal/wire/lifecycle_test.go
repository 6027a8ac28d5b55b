package wire

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// Started and stopped in process: nothing left behind (admission loop,
// relay, consumer, connections), and the ops listener failing reaches
// Run's caller.
func TestServiceLifecycle(t *testing.T) {
	id := testenv.ID(t)
	cfg := Config{OpsAddr: "127.0.0.1:0", Tick: 100 * time.Millisecond, Lease: time.Second, Queues: []string{id},
		InstanceID: "disp-" + id, OrderFailed: config.OrderFailed{OrderFailedQueue: "test." + id + ".order-failed", OrderFailedDeliveryLimit: 20},
		HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second}}
	cfg.Redis.URL = testenv.RedisURL(t)
	cfg.AMQP.URL = testenv.AMQPURL(t)
	cfg.AMQP.Exchange = "test." + id
	t.Cleanup(func() {
		testenv.DeleteAMQPTopology(cfg.AMQP.URL, cfg.AMQP.Exchange, cfg.OrderFailedQueue, cfg.OrderFailedQueue+".dlq")
	})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	testenv.CheckLifecycle(t, func(ctx context.Context) (*Service, error) { return New(ctx, cfg, log) },
		func(svc *Service) { _ = svc.Ops.Close() }, "ops listener")
}
