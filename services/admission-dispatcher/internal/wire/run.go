package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

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
	return service.Run(ctx, "admission-dispatcher", Serve)
}

// Serve wires the dispatcher and runs it until ctx ends. On the way out it
// stops admitting and releases every lease it holds (a standby takes over
// within a tick), stops consuming, then closes its connections.
func Serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	rdb, store, err := redisstore.Connect(ctx, cfg.Redis.URL, log, redisstore.DispatcherScripts...)
	if err != nil {
		return err
	}
	defer rdb.Close()
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: cfg.AMQP.Exchange, Source: "/admission-dispatcher", Log: log})
	if err != nil {
		return err
	}
	defer conn.Close()

	reg := prometheus.NewRegistry()
	m := dispatch.NewMetrics(reg)
	owner := cfg.owner()
	d, err := dispatch.New(store, eventPublisher{pub: conn.Publisher()}, log, m, dispatch.Options{
		Owner: owner, Tick: cfg.Tick, Lease: cfg.Lease, Queues: cfg.Queues, OutboxBound: cfg.OutboxMaxBacklog,
	})
	if err != nil {
		return err
	}
	health := httpserver.NewHealth(map[string]httpserver.Check{
		"redis":    store.Ping,
		"rabbitmq": func(context.Context) error { return conn.Healthy() },
	})
	srv, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP, ShutdownTimeout: cfg.ShutdownTimeout})
	if err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	log.Info("admission-dispatcher starting", "owner", owner, "tick", cfg.Tick.String(), "lease", cfg.Lease.String(), "outbox_max_backlog", cfg.OutboxMaxBacklog)

	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { errs <- d.Run(work) })
	h := restore.NewHandler(store, m, log)
	wg.Go(func() {
		errs <- conn.Consume(work, events.OrderFailedQueue(cfg.OrderFailedQueue, cfg.OrderFailedDeliveryLimit), h.Handle)
	})
	wg.Go(func() { errs <- srv.Serve(work) })

	select {
	case <-ctx.Done():
		log.Info("shutting down: releasing leases")
		health.Drain()
	case err := <-errs:
		log.Error("component stopped", "err", err)
	}
	stop()
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		if err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}
