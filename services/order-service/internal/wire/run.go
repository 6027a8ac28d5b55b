package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/order-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// Run loads the configuration from the environment and serves until ctx ends.
func Run(ctx context.Context) error {
	return service.Run(ctx, "order-service", New)
}

// Service is a wired order-service: connected, its listeners bound.
type Service = service.Wired

// New connects the order-service (waiting for its database up to
// STARTUP_TIMEOUT) and binds its listeners; Run serves.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	if cfg.DevMode {
		log.Warn("AUTH_DEV_MODE is on: the public dev secret is accepted; never run this in production")
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
	db, err := openDB(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	g.Defer("postgres", db.Close)
	rdb, store, err := redisstore.Connect(ctx, cfg.Redis.URL, log, redisstore.OrderScripts...)
	if err != nil {
		return nil, err
	}
	g.Defer("redis", rdb.Close)
	conn, err := broker.New(cfg.AMQP.URL, broker.Options{Exchange: cfg.AMQP.Exchange, Source: "/order-service", Log: log})
	if err != nil {
		return nil, err
	}
	g.Defer("rabbitmq", conn.Close)
	pub := publisher{pub: conn.Publisher()}

	reg := prometheus.NewRegistry()
	m := newServiceMetrics(reg)
	var limits order.Limits
	if cfg.OrderRateLimitPerQueue > 0 {
		if limits.Queue, err = redisstore.NewRateLimiter(rdb, "wr:order:queue:", cfg.OrderRateLimitPerQueue); err != nil {
			return nil, err
		}
	}
	if cfg.OrderRateLimitPerUser > 0 {
		if limits.User, err = redisstore.NewRateLimiter(rdb, "wr:order:user:", cfg.OrderRateLimitPerUser); err != nil {
			return nil, err
		}
	}
	svc, err := order.New(countedTokens{Tokens: store, consumed: m.consumed}, timedRepo{Repo: db, tx: m.tx}, pub, limits, log,
		order.Options{Lease: cfg.OrderLease, MaxQuantity: cfg.MaxQuantity})
	if err != nil {
		return nil, err
	}
	var declared atomic.Bool
	health := httpserver.NewHealth(map[string]httpserver.Check{
		"postgres": db.Ping,
		"redis":    store.Ping,
		// With AUTH_JWKS_URL: no traffic before the provider's keys came once.
		"auth": ver.Ready,
		// RabbitMQ being up is not a readiness condition: orders succeed
		// without it (events wait in the outbox). The OrderFailed queue
		// having been declared once is: before that, a failure's event
		// could be parked as unrouted instead of restoring the token.
		"order-failed-queue": func(context.Context) error {
			if !declared.Load() {
				return errors.New("the OrderFailed queue is not declared yet")
			}
			return nil
		},
	})
	h, err := httpapi.New(httpapi.Options{Service: svc, Verifier: ver, Log: log, Registry: reg, Health: health, TrustedProxies: cfg.TrustedProxies, CORSOrigins: cfg.CORSAllowedOrigins})
	if err != nil {
		return nil, err
	}
	api, err := httpserver.New(cfg.HTTPAddr, h, log, httpserver.Options{Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("order-service: %w", err)
	}
	g.Listen("api listener", api)
	ops, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, fmt.Errorf("order-service: %w", err)
	}
	g.Listen("ops listener", ops)

	g.OnDrain(health.Drain)
	g.Task("declare the OrderFailed queue", func(ctx context.Context) error {
		if declareOrderFailed(ctx, conn, cfg, log) {
			declared.Store(true)
		}
		return nil
	})
	g.Go("outbox relay", func(ctx context.Context) error {
		order.RelayLoop(ctx, db, pub, log, func(n int64) { m.backlog.Set(float64(n)) })
		return nil
	})
	g.Go("reaper", func(ctx context.Context) error {
		svc.ReapLoop(ctx, cfg.ReapInterval, func(r order.ReapResult) {
			m.reaped.WithLabelValues("settled").Add(float64(r.Settled))
			m.reaped.WithLabelValues("abandoned").Add(float64(r.Abandoned))
		})
		return nil
	})
	// A task: with both retentions off there is nothing to prune.
	g.Task("retention", func(ctx context.Context) error {
		order.PruneLoop(ctx, db, order.Retention{Outbox: cfg.OutboxRetention, IdempotencyKeys: cfg.IdempotencyKeyRetention,
			Every: cfg.RetentionInterval, Batch: 1000}, log, func(p order.Pruned) {
			m.pruned.WithLabelValues("outbox").Add(float64(p.Outbox))
			m.pruned.WithLabelValues("idempotency").Add(float64(p.Idempotency))
		})
		return nil
	})
	return &Service{Group: g, API: api, Ops: ops}, nil
}

// openDB opens Postgres, retrying while it is not up yet (a pod may start
// before its database), so a restart storm is not needed to recover.
func openDB(ctx context.Context, cfg Config, log *slog.Logger) (*pg.DB, error) {
	deadline := time.Now().Add(cfg.StartupTimeout)
	pause := 200 * time.Millisecond
	for {
		db, err := pg.Open(ctx, cfg.Database.URL, pg.Options{MaxOpenConns: cfg.DBMaxConns, Log: log, TxTimeout: cfg.TxTimeout})
		if err == nil {
			return db, nil
		}
		if time.Now().After(deadline) || !errors.Is(err, order.ErrUnavailable) {
			return nil, fmt.Errorf("order-service: database: %w", err)
		}
		log.Warn("database not reachable yet; retrying", "err", err, "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// declareOrderFailed makes sure the dispatcher's OrderFailed queue exists, so
// no failure published before the dispatcher's first start is parked as
// unrouted. It retries until it succeeds or ctx ends.
func declareOrderFailed(ctx context.Context, conn *broker.Conn, cfg Config, log *slog.Logger) bool {
	spec := events.OrderFailedQueue(cfg.OrderFailedQueue, cfg.OrderFailedDeliveryLimit)
	pause := 200 * time.Millisecond
	for {
		err := conn.Declare(ctx, spec)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		log.Warn("declare the OrderFailed queue", "queue", spec.Name, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}
