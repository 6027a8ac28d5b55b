package wire

import (
	"context"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/presence"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/app"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/httpapi"
)

// Service is a wired gateway, listening on its API port and its ops
// listener.
type Service = service.Wired

// New wires the gateway and binds its listeners. Redis need not be up: the
// client connects lazily and the gateway answers 503 until it is. On the
// way out readiness fails first, then in-flight requests finish, then the
// Redis client closes.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	if cfg.DevMode {
		log.Warn("AUTH_DEV_MODE is on: anybody can mint tokens at POST /api/v1/dev/token")
	}
	b := service.NewBuilder("queue-gateway", log)
	defer b.CloseOnError(&err)
	ver, err := b.Verifier(ctx, cfg.Auth)
	if err != nil {
		return nil, err
	}
	rdb, store, err := b.Redis(ctx, cfg.Redis, redisstore.GatewayScripts...)
	if err != nil {
		return nil, err
	}
	signer, err := cfg.challengeSigner()
	if err != nil {
		return nil, err
	}
	var limits app.Limits
	if cfg.EnterRateLimitPerIP > 0 {
		if limits.Enter, err = redisstore.NewRateLimiter(rdb, "wr:enter:ip:", cfg.EnterRateLimitPerIP); err != nil {
			return nil, err
		}
		if limits.Challenge, err = redisstore.NewRateLimiter(rdb, "wr:challenge:ip:", cfg.EnterRateLimitPerIP); err != nil {
			return nil, err
		}
	}
	// Every queue's configuration in memory, so a queue that fails OPEN
	// still answers (BYPASS, with a pass) while Redis is down; its
	// refreshes are the probe that tells whether Redis is.
	configs := redisstore.NewConfigCache(store, time.Second)
	b.Group.Go("config cache", configs.Run)
	// The admission frontier of every queue polled here, so a poll with a
	// ticket far from the front costs Redis nothing.
	tickets, frontiers, err := b.Tickets(cfg.Tickets, cfg.Auth, store, "gateway")
	if err != nil {
		return nil, err
	}
	svc, err := app.New(store, signer, limits, configs, NewMetrics(b.Registry))
	if err != nil {
		return nil, err
	}
	passes, err := grant.FromSettings(cfg.EntryTokens.Keys)
	if err != nil {
		return nil, err
	}
	// The signs of life of the people of queues with presence on, sent
	// once a second in one call a line.
	sightings := presence.New(store, presence.NewMetrics(b.Registry))
	b.Group.Go("presence", sightings.Run)
	svc.WithTickets(tickets, frontiers).WithPasses(passes).WithPresence(sightings).WithWordings(store)
	RegisterQueueLengths(b.Registry, svc, log)
	page := cfg.page()
	var local httpapi.Limits
	if local.Public, err = cfg.LocalLimits.Limiter(cfg.PublicRatePerIP, 0); err != nil {
		return nil, err
	}
	if local.Position, err = cfg.LocalLimits.Limiter(cfg.PositionRatePerUser, 0); err != nil {
		return nil, err
	}
	h, err := httpapi.New(httpapi.Options{
		Limits:           local,
		Service:          svc,
		Verifier:         ver,
		Log:              log,
		Registry:         b.Registry,
		Health:           b.Health(),
		ClientIPv6Prefix: cfg.ClientIPv6Prefix,
		DevMode:          cfg.DevMode,
		TrustedProxies:   cfg.TrustedProxies,
		Page:             &page,
	})
	if err != nil {
		return nil, err
	}
	return b.Listen(service.Listeners{API: h, APIAddr: cfg.HTTPAddr, OpsAddr: cfg.OpsAddr, Pprof: cfg.PprofEnabled, Timeouts: cfg.HTTP})
}
