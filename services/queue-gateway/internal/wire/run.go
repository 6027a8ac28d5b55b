package wire

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// Run loads the configuration from the environment and serves until ctx ends.
func Run(ctx context.Context) error {
	return service.Run(ctx, "queue-gateway", New)
}

// Service is a wired gateway, listening on its API port and its ops
// listener.
type Service = service.Wired

// New wires the gateway and binds its listeners. Redis need not be up: the
// client connects lazily and the gateway answers 503 until it is.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	if cfg.DevMode {
		log.Warn("AUTH_DEV_MODE is on: anybody can mint tokens at POST /api/v1/dev/token; never run this in production")
	}
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
	signer, err := cfg.challengeSigner()
	if err != nil {
		return nil, err
	}
	svc, err := app.New(store, signer)
	if err != nil {
		return nil, err
	}
	var limiter, chLimiter httpapi.Limiter
	if cfg.EnterRateLimitPerIP > 0 {
		if limiter, err = redisstore.NewRateLimiter(rdb, "wr:enter:ip:", cfg.EnterRateLimitPerIP); err != nil {
			return nil, err
		}
		if chLimiter, err = redisstore.NewRateLimiter(rdb, "wr:challenge:ip:", cfg.EnterRateLimitPerIP); err != nil {
			return nil, err
		}
	}
	// With AUTH_JWKS_URL, no traffic before the provider's keys came once.
	health := httpserver.NewHealth(map[string]httpserver.Check{"redis": store.Ping, "auth": ver.Ready})
	reg := prometheus.NewRegistry()
	page := cfg.page()
	h, err := httpapi.New(httpapi.Options{
		Service:          svc,
		Verifier:         ver,
		Log:              log,
		Registry:         reg,
		Health:           health,
		EnterLimiter:     limiter,
		ChallengeLimiter: chLimiter,
		ClientIPv6Prefix: cfg.ClientIPv6Prefix,
		DevMode:          cfg.DevMode,
		TrustedProxies:   cfg.TrustedProxies,
		QueueLister:      store,
		Page:             &page,
	})
	if err != nil {
		return nil, err
	}
	api, err := httpserver.New(cfg.HTTPAddr, h, log, httpserver.Options{Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.Listen("api listener", api)
	ops, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.Listen("ops listener", ops)

	// Readiness fails first, then in-flight requests finish, then the Redis
	// client closes.
	g.OnDrain(health.Drain)
	return &Service{Group: g, API: api, Ops: ops}, nil
}
