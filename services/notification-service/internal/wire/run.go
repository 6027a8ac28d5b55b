package wire

import (
	"context"
	"log/slog"
	"time"

	"github.com/waitingroom/waitingroom/pkg/presence"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/service"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/httpapi"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/hub"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/push"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream"
)

// Service is a wired notification-service: connected, its listeners bound.
type Service = service.Wired

// New connects the notification-service and binds its listeners; Run
// serves. On the way out it refuses new streams and drops the open ones
// (they never end on their own; EventSource reconnects to another
// replica), then the servers shut down.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	b := service.NewBuilder("notification-service", log)
	defer b.CloseOnError(&err)
	ver, err := b.Verifier(ctx, cfg.Auth)
	if err != nil {
		return nil, err
	}
	_, store, err := b.Redis(ctx, cfg.Redis, redisstore.NotificationScripts...)
	if err != nil {
		return nil, err
	}
	conn, err := b.Broker(cfg.AMQP, true)
	if err != nil {
		return nil, err
	}

	h := hub.New(cfg.Buffer, cfg.MaxStreamsPerIP, hub.MaxPerUser(cfg.MaxStreamsPerUser), hub.IPv6Prefix(cfg.ClientIPv6Prefix))
	// The queue configs in memory, so a queue that fails OPEN is known as
	// such while Redis is away.
	configs := redisstore.NewConfigCache(store, time.Second)
	// The admission frontier of every queue with a stream here: the
	// positions of streams with a ticket far from the front cost Redis
	// nothing.
	tickets, frontiers, err := b.Tickets(cfg.Tickets, cfg.Auth, store, "sse")
	if err != nil {
		return nil, err
	}
	svc := stream.New(h, failOpen{Positions: store, cache: configs}, log, NewMetrics(b.Registry, h), stream.Options{
		Heartbeat: cfg.Heartbeat, PositionEvery: cfg.PositionEvery, WriteTimeout: cfg.WriteTimeout,
	}).WithTickets(tickets, frontiers)
	// An open stream keeps its holder present (the queue knob
	// awayAfterSeconds): sighted every position round, sent once a second.
	sightings := presence.New(store, presence.NewMetrics(b.Registry))
	svc.WithSightings(presenceOn{book: sightings, configs: configs})
	var pusher *push.Service
	if cfg.Push.On() {
		pusher, err = push.New(push.Config{
			PublicKey: cfg.Push.PublicKey, PrivateKey: cfg.Push.PrivateKey, Subject: cfg.Push.Subject,
			Endpoints: push.Endpoints{Hosts: cfg.Push.EndpointHosts, Loopback: cfg.Push.LoopbackEndpoints},
			Rate:      cfg.Push.Rate, Burst: cfg.Push.Burst, Lifetime: cfg.Push.SubscriptionTTL,
			Devices: cfg.Push.DevicesPerUser, Attempts: cfg.Push.Attempts,
		}, store, log, push.NewMetrics(b.Registry))
		if err != nil {
			return nil, err
		}
	}
	api, err := httpapi.New(httpapi.Options{Service: svc, Verifier: ver, Log: log, Registry: b.Registry, Health: b.Health(),
		TrustedProxies: cfg.TrustedProxies, CORSOrigins: cfg.CORSAllowedOrigins, Push: pusher})
	if err != nil {
		return nil, err
	}
	// The streams' goroutines stop once the components returned (the API
	// server too: no request is passed on any more), before the
	// connections they use close.
	b.Group.Defer("event streams", api.Close)
	// HTTP_WRITE_TIMEOUT does not end a stream: the stream handler sets
	// a write deadline per frame.
	w, err := b.Listen(service.Listeners{API: api, APIAddr: cfg.HTTPAddr, OpsAddr: cfg.OpsAddr, Pprof: cfg.PprofEnabled, Timeouts: cfg.HTTP})
	if err != nil {
		return nil, err
	}
	b.Group.OnDrain(h.Shut)
	b.Group.Go("token events consumer", func(ctx context.Context) error { return conn.Consume(ctx, tokenEvents(), handle(svc)) })
	if pusher != nil {
		b.Group.Go("web push", func(ctx context.Context) error {
			return conn.Consume(ctx, pushEvents(cfg.Push), pushTurn(pusher, cfg.Push.Concurrency))
		})
	}
	b.Group.Go("positions", func(ctx context.Context) error { svc.RunPositions(ctx); return nil })
	b.Group.Go("queue configs", configs.Run)
	b.Group.Go("presence", sightings.Run)
	return w, nil
}
