package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/order-service/internal/audit"
	"github.com/waitingroom/waitingroom/services/order-service/internal/history"
	"github.com/waitingroom/waitingroom/services/order-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/pg"
)

// Service is a wired order-service: connected, its listeners bound.
type Service = service.Wired

// New connects the order-service (waiting for its database up to
// STARTUP_TIMEOUT) and binds its listeners; Run serves.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	b := service.NewBuilder("order-service", log)
	defer b.CloseOnError(&err)
	ver, err := b.Verifier(ctx, cfg.Auth)
	if err != nil {
		return nil, err
	}
	m := newMetrics(b.Registry)
	var db *pg.DB
	err = service.Retry(ctx, log, "open the database", cfg.StartupTimeout,
		func(err error) bool { return errors.Is(err, order.ErrUnavailable) },
		func(ctx context.Context) (err error) {
			db, err = pg.Open(ctx, cfg.Database.URL, pg.Options{MaxOpenConns: cfg.DBMaxConns, Log: log, TxTimeout: cfg.TxTimeout,
				Statements: func(d time.Duration) { m.statements.Observe(d.Seconds()) }, SlowWarn: cfg.DBSlowStatementWarn,
				GroupCommit: cfg.OrderGroupCommit, Batched: m.batched})
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("order-service: %w", err)
	}
	b.Group.Defer("postgres", db.Close)
	b.Check("postgres", db.Ping)
	rdb, store, err := b.Redis(ctx, cfg.Redis, redisstore.OrderScripts...)
	if err != nil {
		return nil, err
	}
	// RabbitMQ being up is not a readiness condition: orders succeed
	// without it (events wait in the outbox).
	conn, err := b.Broker(cfg.AMQP, false)
	if err != nil {
		return nil, err
	}
	pub := publisher{pub: conn.Publisher()}

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
	// The queues' configurations in memory, so the order path knows a
	// queue's fail mode, rate and order limit while Redis is gone. Read once
	// before the first request, then every second.
	configs := redisstore.NewConfigCache(store, time.Second)
	if err := configs.Refresh(ctx); err != nil {
		log.Warn("queue configurations not read; retried every second", "err", err)
	}
	var health *order.Health // nil: reports off
	if cfg.HealthInterval > 0 {
		health = order.NewHealth(replicaID())
	}
	signed, err := grant.FromSettings(cfg.EntryTokens.Keys)
	if err != nil {
		return nil, err
	}
	svc, err := order.New(m.tokens(store), countLookups(m.repo(db), b.Registry), pub, limits, log,
		order.Options{Lease: cfg.OrderLease, MaxQuantity: cfg.MaxQuantity, Metrics: m, Health: health, Configs: configs,
			Tokens: signed, OutageMaxOrders: cfg.FailOpenMaxOrdersPerUser})
	if err != nil {
		return nil, err
	}
	// The OrderFailed queue having been declared once is a readiness
	// condition: before that, a failure's event could be parked as
	// unrouted instead of restoring the token.
	var declared atomic.Bool
	b.Check("order-failed-queue", func(context.Context) error {
		if !declared.Load() {
			return errors.New("the OrderFailed queue is not declared yet")
		}
		return nil
	})
	local, err := localLimits(cfg)
	if err != nil {
		return nil, err
	}
	trail := audit.New(db)
	hist := history.New(db)
	h, err := httpapi.New(httpapi.Options{Service: svc, Audit: trail, History: hist, Verifier: ver, Log: log, Registry: b.Registry, Health: b.Health(),
		TrustedProxies: cfg.TrustedProxies, CORSOrigins: cfg.CORSAllowedOrigins, Limits: local})
	if err != nil {
		return nil, err
	}
	w, err := b.Listen(service.Listeners{API: h, APIAddr: cfg.HTTPAddr, OpsAddr: cfg.OpsAddr, Pprof: cfg.PprofEnabled, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, err
	}

	spec := events.OrderFailedQueue(cfg.OrderFailedQueue, cfg.OrderFailedDeliveryLimit)
	b.Group.Task("declare the OrderFailed queue", func(ctx context.Context) error {
		if service.Retry(ctx, log, "declare the OrderFailed queue "+spec.Name, 0, nil,
			func(ctx context.Context) error { return conn.Declare(ctx, spec) }) == nil {
			declared.Store(true)
		}
		return nil
	})
	b.Group.Go("queue changes", func(ctx context.Context) error {
		return conn.Consume(ctx, queueChanges(cfg.QueueChangesQueue), recordChange(trail, hist, log))
	})
	b.Group.Go("queue configurations", configs.Run)
	b.Group.Go("outbox relay", func(ctx context.Context) error {
		order.RelayLoop(ctx, db, pub, log, health.WithBacklog(m))
		return nil
	})
	if health != nil {
		hp := healthPublisher{pub: conn.Publisher()}
		b.Group.Go("health reports", func(ctx context.Context) error {
			health.Loop(ctx, cfg.HealthInterval, hp, log, m)
			return nil
		})
	}
	b.Group.Go("reaper", func(ctx context.Context) error {
		svc.ReapLoop(ctx, cfg.ReapInterval)
		return nil
	})
	b.Group.Go("history", func(ctx context.Context) error {
		hist.Loop(ctx, cfg.HistoryRollUpInterval, cfg.HistoryRetention, log)
		return nil
	})
	// A task: with both retentions off there is nothing to prune.
	b.Group.Task("retention", func(ctx context.Context) error {
		order.PruneLoop(ctx, db, order.Retention{Outbox: cfg.OutboxRetention, IdempotencyKeys: cfg.IdempotencyKeyRetention,
			Every: cfg.RetentionInterval, Batch: 1000}, log, m)
		return nil
	})
	return w, nil
}
