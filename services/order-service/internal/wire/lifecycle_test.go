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

// Started and stopped in process: nothing left behind (database, Redis and
// broker connections, loops), and a listener that fails reaches Run's
// caller.
func TestServiceLifecycle(t *testing.T) {
	id := testenv.ID(t)
	cfg := Config{HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", OrderLease: 30 * time.Second, TxTimeout: 5 * time.Second,
		DBMaxConns: 4, ReapInterval: 100 * time.Millisecond, MaxQuantity: 10, StartupTimeout: 10 * time.Second, HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second},
		RetentionInterval: time.Hour}
	cfg.JWTSecret = testSecret
	cfg.Redis.URL = testenv.RedisURL(t)
	cfg.Database.URL = testenv.PostgresURL(t)
	cfg.AMQP.URL = testenv.AMQPURL(t)
	cfg.AMQP.Exchange = "test." + id
	cfg.OrderFailedQueue, cfg.OrderFailedDeliveryLimit = cfg.AMQP.Exchange+".restorer", 20
	cfg.QueueChangesQueue = cfg.AMQP.Exchange + ".queue-changes"
	t.Cleanup(func() { deleteTopology(cfg.AMQP.URL, cfg.AMQP.Exchange) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	testenv.CheckLifecycle(t, func(ctx context.Context) (*Service, error) { return New(ctx, cfg, log) },
		func(s *Service) { _ = s.Ops.Close() }, "ops listener")
}
