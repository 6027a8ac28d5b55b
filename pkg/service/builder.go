package service

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/broker"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
	"github.com/waitingroom/waitingroom/pkg/ticket"
)

// Builder is what a service's wire.New assembles the service with, so the
// four constructors say only what differs between them. Every connection it
// opens is closed when the service ends, or at once when the constructor
// fails (defer CloseOnError); every dependency adds its readiness check;
// Listen binds the API and ops listeners over one health and one metrics
// registry and returns the Wired service.
//
//	b := service.NewBuilder("order-service", log)
//	defer b.CloseOnError(&err)
//	rdb, store, err := b.Redis(ctx, cfg.Redis, redisstore.OrderScripts...)
//	...
//	return b.Listen(service.Listeners{API: h, APIAddr: cfg.HTTPAddr, ...})
type Builder struct {
	// Group holds the components and the resources to close; add the
	// service's own loops and consumers to it.
	Group *Group
	// Registry is the service's metrics registry, served on the ops
	// listener.
	Registry *prometheus.Registry

	name   string
	log    *slog.Logger
	checks map[string]httpserver.Check
	health *httpserver.Health
}

// NewBuilder starts assembling the service called name.
func NewBuilder(name string, log *slog.Logger) *Builder {
	return &Builder{Group: NewGroup(log), Registry: prometheus.NewRegistry(), name: name, log: log,
		checks: map[string]httpserver.Check{}}
}

// CloseOnError closes everything opened so far when *err is set: a
// constructor defers it, so a start that fails half way leaves no
// connection open and no port bound.
func (b *Builder) CloseOnError(err *error) {
	if *err != nil {
		_ = b.Group.Close()
	}
}

// Verifier builds the token verifier from the auth settings. With
// AUTH_JWKS_URL the service is not ready before the provider's keys came
// once.
func (b *Builder) Verifier(ctx context.Context, cfg config.Auth) (*auth.Verifier, error) {
	if cfg.DevMode {
		b.log.Warn("AUTH_DEV_MODE is on: the public dev secret is accepted; never run this in production")
	}
	ver, err := auth.FromConfig(ctx, cfg, b.log)
	if err != nil {
		return nil, err
	}
	b.Group.Defer("token verifier", func() error { ver.Close(); return nil })
	b.Check("auth", ver.Ready)
	return ver, nil
}

// Redis connects to Redis and loads scripts. Redis need not be up: the
// client connects lazily, and the service is not ready until it answers.
func (b *Builder) Redis(ctx context.Context, cfg config.Redis, scripts ...*redis.Script) (redis.UniversalClient, *redisstore.Store, error) {
	if err := cfg.Check(); err != nil {
		return nil, nil, err
	}
	rdb, store, err := redisstore.Connect(ctx, cfg.URL, b.log, scripts...)
	if err != nil {
		return nil, nil, err
	}
	if n := cfg.Replicas(); n != 0 {
		store.RequireReplicas(n, cfg.Wait())
		b.log.Info("changes are acknowledged once replicas hold them", "replicas", cmp.Or(strings.TrimSpace(cfg.WaitReplicas), "all"), "wait", cfg.Wait())
	} else if !strings.HasPrefix(cfg.URL, "redis://") && !strings.HasPrefix(cfg.URL, "rediss://") {
		b.log.Warn("REDIS_WAIT_REPLICAS is 0: a failover can undo acknowledged places, admissions and orders' token use")
	}
	b.Group.Defer("redis", rdb.Close)
	b.Group.Defer("redis store's background work", store.Wait) // before the client closes
	if telemetry.Enabled() {
		// A span a command and a pipeline, named by the command (evalsha
		// for a script), with the calling function as code.function. No
		// db.statement: script arguments carry token secrets.
		if err := redisotel.InstrumentTracing(rdb, redisotel.WithDBStatement(false)); err != nil {
			return nil, nil, err
		}
	}
	b.Check("redis", store.Ping)
	return rdb, store, nil
}

// Broker connects to RabbitMQ (reconnecting on its own from then on).
// required makes a broker outage a readiness failure; a service that can
// work on without it (the order-service, whose events wait in the outbox)
// passes false.
func (b *Builder) Broker(cfg config.AMQP, required bool) (*broker.Conn, error) {
	conn, err := broker.New(cfg.URL, broker.Options{Exchange: cfg.Exchange, Source: "/" + b.name, Log: b.log})
	if err != nil {
		return nil, err
	}
	b.Group.Defer("rabbitmq", conn.Close)
	if required {
		b.Check("rabbitmq", func(context.Context) error { return conn.Healthy() })
	}
	return conn, nil
}

// Tickets builds what answers polls with queue tickets: the ticket
// signer from TICKET_KEYS (or a key derived from the JWT secret) and the
// admission frontier cache over store, run in the service's group, its read
// rounds counted as waitingroom_<subsystem>_frontier_reads_total{outcome}.
func (b *Builder) Tickets(cfg config.Tickets, a config.Auth, store *redisstore.Store, subsystem string) (*ticket.Signer, *redisstore.FrontierCache, error) {
	signer, err := ticket.FromSettings(cfg.Keys, a.JWTSecret, auth.DevSecret, a.DevMode)
	if err != nil {
		return nil, nil, err
	}
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "waitingroom", Subsystem: subsystem, Name: "frontier_reads_total",
		Help: "Rounds of reading the admission frontier of every queue polled with tickets (one script a queue), by outcome: ok or error. While they fail, ticket polls are answered by Redis."},
		[]string{"outcome"})
	b.Registry.MustRegister(reads)
	frontiers := redisstore.NewFrontierCache(store, b.log, redisstore.FrontierOptions{Observe: func(_ int, _ time.Duration, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		reads.WithLabelValues(outcome).Inc()
	}})
	b.Group.Go("frontier cache", frontiers.Run)
	return signer, frontiers, nil
}

// Check adds a readiness check. It must come before Health.
func (b *Builder) Check(name string, c httpserver.Check) {
	if b.health != nil {
		panic("service: readiness check " + name + " added after Health")
	}
	b.checks[name] = c
}

// Health is the service's health over every check added so far; the API
// handler takes it for its public /readyz. It is built once.
func (b *Builder) Health() *httpserver.Health {
	if b.health == nil {
		b.health = httpserver.NewHealth(b.checks)
		// waitingroom_dependency_up{service,dependency}, one per check.
		b.Registry.MustRegister(b.health.Collector(b.name))
	}
	return b.health
}

// Listeners are the service's listening sockets.
type Listeners struct {
	// API is the public API's handler, served on APIAddr; nil for a
	// service without one (the dispatcher).
	API     http.Handler
	APIAddr string
	// OpsAddr serves /metrics, /healthz, /readyz and, with Pprof,
	// /debug/pprof/.
	OpsAddr  string
	Pprof    bool
	Timeouts config.HTTP
}

// Listen binds the listeners and returns the wired service. On the way out
// readiness fails first, before any other drain hook and while in-flight
// requests still finish.
func (b *Builder) Listen(l Listeners) (*Wired, error) {
	health := b.Health()
	w := &Wired{Group: b.Group}
	if l.API != nil {
		api, err := httpserver.New(l.APIAddr, l.API, b.log, httpserver.Options{Timeouts: l.Timeouts})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		b.Group.Listen("api listener", api)
		w.API = api
	}
	ops, err := httpserver.NewOps(l.OpsAddr, httpserver.OpsOptions{Registry: b.Registry, Health: health, Pprof: l.Pprof,
		Log: b.log, Timeouts: l.Timeouts})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.name, err)
	}
	b.Group.Listen("ops listener", ops)
	w.Ops = ops
	b.Group.OnDrainFirst(health.Drain)
	return w, nil
}
