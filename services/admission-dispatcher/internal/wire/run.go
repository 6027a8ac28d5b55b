package wire

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
)

// Run loads the configuration from the environment and runs until ctx ends.
func Run(ctx context.Context) error {
	return service.Run(ctx, "admission-dispatcher", New)
}

// Service is a wired dispatcher: connected, its ops listener bound.
type Service = service.Wired

// New connects the dispatcher and binds its ops listener. Run runs it; on
// the way out it stops admitting and releases every lease it holds (a
// standby takes over within a tick), stops consuming, then closes its
// connections.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	g := service.NewGroup(log)
	defer func() {
		if err != nil {
			_ = g.Close()
		}
	}()
	rdb, store, err := redisstore.Connect(ctx, cfg.Redis.URL, log, redisstore.DispatcherScripts...)
	if err != nil {
		return nil, err
	}
	g.Defer("redis", rdb.Close)
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: cfg.AMQP.Exchange, Source: "/admission-dispatcher", Log: log})
	if err != nil {
		return nil, err
	}
	g.Defer("rabbitmq", conn.Close)

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	owner := cfg.owner()
	d, err := dispatch.New(store, eventPublisher{pub: conn.Publisher()}, log, m, dispatch.Options{
		Owner: owner, Tick: cfg.Tick, Lease: cfg.Lease, Queues: cfg.Queues, OutboxBound: cfg.OutboxMaxBacklog,
	})
	if err != nil {
		return nil, err
	}
	health := httpserver.NewHealth(map[string]httpserver.Check{
		"redis":    store.Ping,
		"rabbitmq": func(context.Context) error { return conn.Healthy() },
	})
	ops, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("dispatcher: %w", err)
	}
	g.Listen("ops listener", ops)
	log.Info("admission-dispatcher starting", "owner", owner, "tick", cfg.Tick.String(), "lease", cfg.Lease.String(), "outbox_max_backlog", cfg.OutboxMaxBacklog)

	restorer := restore.NewHandler(store, m, log)
	g.OnDrain(health.Drain)
	g.Go("admission", d.Run)
	g.Go("order-failed consumer", func(ctx context.Context) error {
		return conn.Consume(ctx, events.OrderFailedQueue(cfg.OrderFailedQueue, cfg.OrderFailedDeliveryLimit), orderFailedConsumer(restorer, log))
	})
	return &Service{Group: g, Ops: ops}, nil
}
