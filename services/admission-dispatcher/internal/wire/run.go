package wire

import (
	"context"
	"log/slog"

	"github.com/waitingroom/waitingroom/pkg/events"
	"github.com/waitingroom/waitingroom/pkg/grant"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
)

// Service is a wired dispatcher: connected, its ops listener bound.
type Service = service.Wired

// New connects the dispatcher and binds its ops listener. Run runs it; on
// the way out it stops admitting and releases every lease it holds (a
// standby takes over within a tick), stops consuming, then closes its
// connections.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	b := service.NewBuilder("admission-dispatcher", log)
	defer b.CloseOnError(&err)
	_, store, err := b.Redis(ctx, cfg.Redis, redisstore.DispatcherScripts...)
	if err != nil {
		return nil, err
	}
	conn, err := b.Broker(cfg.AMQP, true)
	if err != nil {
		return nil, err
	}

	m := newMetrics(b.Registry)
	owner := cfg.owner()
	tokens, err := grant.FromSettings(cfg.EntryTokens.Keys)
	if err != nil {
		return nil, err
	}
	d, err := dispatch.New(store, eventPublisher{pub: conn.Publisher(), batch: cfg.TokenEvents == TokenEventsBatch}, log, m, dispatch.Options{
		Owner: owner, Tick: cfg.Tick, Lease: cfg.Lease, Queues: cfg.Queues, OutboxBound: cfg.OutboxMaxBacklog, Tokens: tokens,
	})
	if err != nil {
		return nil, err
	}
	w, err := b.Listen(service.Listeners{OpsAddr: cfg.OpsAddr, Pprof: cfg.PprofEnabled, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, err
	}
	log.Info("admission-dispatcher starting", "owner", owner, "tick", cfg.Tick.String(), "lease", cfg.Lease.String(), "outbox_max_backlog", cfg.OutboxMaxBacklog, "token_events", cfg.TokenEvents, "signed_tokens", tokens != nil)

	restorer := restore.NewHandler(store, m, log)
	b.Group.Go("admission", d.Run)
	b.Group.Go("order-failed consumer", func(ctx context.Context) error {
		return conn.Consume(ctx, events.OrderFailedQueue(cfg.OrderFailedQueue, cfg.OrderFailedDeliveryLimit), orderFailedConsumer(restorer, log))
	})
	b.Group.Go("order health consumer", func(ctx context.Context) error {
		return conn.Consume(ctx, healthReports(), healthConsumer(d, log))
	})
	return w, nil
}
