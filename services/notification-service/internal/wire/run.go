package wire

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/api"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// Run loads the configuration from the environment and serves until ctx ends.
func Run(ctx context.Context) error {
	return service.Run(ctx, "notification-service", func(ctx context.Context, cfg Config, log *slog.Logger) error {
		return Serve(ctx, cfg, log, nil)
	})
}

// Serve wires the service and serves until ctx ends; ready, if set, gets
// the bound API and ops addresses.
func Serve(ctx context.Context, cfg Config, log *slog.Logger, ready func(api, ops string)) error {
	ver, err := auth.FromConfig(ctx, cfg.Auth, log)
	if err != nil {
		return err
	}
	rdb, store, err := redisstore.Connect(ctx, cfg.Redis.URL, log, redisstore.GatewayScripts...)
	if err != nil {
		return err
	}
	defer rdb.Close()
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: cfg.AMQP.Exchange, Source: "/notification-service", Log: log})
	if err != nil {
		return err
	}
	defer conn.Close()

	reg := prometheus.NewRegistry()
	var m *stream.Metrics
	h := hub.New(cfg.Buffer, cfg.MaxStreamsPerIP, func(reason string) { m.DropHook(reason) },
		hub.MaxPerUser(cfg.MaxStreamsPerUser), hub.IPv6Prefix(cfg.ClientIPv6Prefix))
	m = stream.NewMetrics(reg, h)
	svc := stream.New(h, store, log, m, stream.Options{
		Heartbeat: cfg.Heartbeat, PositionEvery: cfg.PositionEvery, WriteTimeout: cfg.WriteTimeout,
	})
	health := httpserver.NewHealth(map[string]httpserver.Check{
		"redis":    store.Ping,
		"rabbitmq": func(context.Context) error { return conn.Healthy() },
		// With AUTH_JWKS_URL: no traffic before the provider's keys came once.
		"auth": ver.Ready,
	})
	e, err := httpserver.NewEngine(httpserver.EngineOptions{
		Service: "notification-service", Log: log, Registry: reg, Health: health,
		TrustedProxies: cfg.TrustedProxies, CORSOrigins: cfg.CORSAllowedOrigins,
	})
	if err != nil {
		return err
	}
	api.Register(e, ver, svc)
	// HTTP_WRITE_TIMEOUT does not end a stream: the stream handler sets
	// a write deadline per frame.
	srv, err := httpserver.New(cfg.HTTPAddr, e, log, httpserver.Options{Timeouts: cfg.HTTP, ShutdownTimeout: cfg.ShutdownTimeout})
	if err != nil {
		return fmt.Errorf("notification-service: %w", err)
	}
	ops, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP, ShutdownTimeout: cfg.ShutdownTimeout})
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("notification-service: %w", err)
	}
	if ready != nil {
		ready(srv.Addr(), ops.Addr())
	}

	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- srv.Serve(work) })
	wg.Go(func() { errs <- ops.Serve(work) })
	wg.Go(func() { _ = conn.Consume(work, tokenEvents(), handle(svc)) })
	wg.Go(func() { svc.RunPositions(work) })
	select {
	case <-ctx.Done():
		health.Drain()
	case err = <-errs:
		log.Error("http server stopped", "err", err)
	}
	// Streams never end on their own: keep dropping them while the server
	// shuts down, so its graceful shutdown does not wait out its timeout;
	// EventSource reconnects to another replica.
	stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		h.CloseAll()
		select {
		case <-done:
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
