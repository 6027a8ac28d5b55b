package wire

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// Run loads the configuration from the environment and serves until ctx ends.
func Run(ctx context.Context) error {
	return service.Run(ctx, "notification-service", New)
}

// Service is a wired notification-service: connected, its listeners bound.
type Service = service.Wired

// New connects the notification-service and binds its listeners; Run
// serves. On the way out it refuses new streams and drops the open ones
// (they never end on their own; EventSource reconnects to another
// replica), then the servers shut down.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	g := service.NewGroup(log)
	defer func() {
		if err != nil {
			_ = g.Close()
		}
	}()
	ver, err := auth.FromConfig(ctx, cfg.Auth, log)
	if err != nil {
		return nil, err
	}
	g.Defer("token verifier", func() error { ver.Close(); return nil })
	rdb, store, err := redisstore.Connect(ctx, cfg.Redis.URL, log, redisstore.GatewayScripts...)
	if err != nil {
		return nil, err
	}
	g.Defer("redis", rdb.Close)
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: cfg.AMQP.Exchange, Source: "/notification-service", Log: log})
	if err != nil {
		return nil, err
	}
	g.Defer("rabbitmq", conn.Close)

	reg := prometheus.NewRegistry()
	var m *httpapi.Metrics
	h := hub.New(cfg.Buffer, cfg.MaxStreamsPerIP, func(reason string) { m.Dropped(reason) },
		hub.MaxPerUser(cfg.MaxStreamsPerUser), hub.IPv6Prefix(cfg.ClientIPv6Prefix))
	m = httpapi.NewMetrics(reg, h)
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
		return nil, err
	}
	httpapi.Register(e, ver, svc)
	// HTTP_WRITE_TIMEOUT does not end a stream: the stream handler sets
	// a write deadline per frame.
	apiSrv, err := httpserver.New(cfg.HTTPAddr, e, log, httpserver.Options{Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("notification-service: %w", err)
	}
	g.Listen("api listener", apiSrv)
	ops, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("notification-service: %w", err)
	}
	g.Listen("ops listener", ops)

	g.OnDrain(health.Drain)
	g.OnDrain(h.Shut)
	g.Go("token events consumer", func(ctx context.Context) error { return conn.Consume(ctx, tokenEvents(), handle(svc)) })
	g.Go("positions", func(ctx context.Context) error { svc.RunPositions(ctx); return nil })
	return &Service{Group: g, API: apiSrv, Ops: ops}, nil
}
