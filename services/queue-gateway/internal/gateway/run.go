package gateway

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
	return service.Run(ctx, "queue-gateway", func(ctx context.Context, cfg Config, log *slog.Logger) error {
		srv, err := NewServer(ctx, cfg, log)
		if err != nil {
			return err
		}
		return srv.Serve(ctx)
	})
}

// Server is a wired gateway, listening on its API port and its ops listener.
type Server struct {
	http   *httpserver.Server
	ops    *httpserver.Server
	health *httpserver.Health
	closer func() error
}

// NewServer wires the gateway and binds its listener. Redis need not be up:
// the client connects lazily and the gateway answers 503 until it is.
func NewServer(ctx context.Context, cfg Config, log *slog.Logger) (*Server, error) {
	if cfg.DevMode {
		log.Warn("AUTH_DEV_MODE is on: anybody can mint tokens at POST /api/v1/dev/token; never run this in production")
	}
	ver, err := auth.FromConfig(ctx, cfg.Auth, log)
	if err != nil {
		return nil, err
	}
	rdb, store, err := redisstore.Connect(ctx, cfg.Redis.URL, log, redisstore.GatewayScripts...)
	if err != nil {
		return nil, err
	}
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
		_ = rdb.Close()
		return nil, err
	}
	hs, err := httpserver.New(cfg.HTTPAddr, h, log, httpserver.Options{Timeouts: cfg.HTTP, ShutdownTimeout: cfg.ShutdownTimeout})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	ops, err := httpserver.NewOps(cfg.OpsAddr, httpserver.OpsOptions{Registry: reg, Health: health, Pprof: cfg.PprofEnabled,
		Log: log, Timeouts: cfg.HTTP, ShutdownTimeout: cfg.ShutdownTimeout})
	if err != nil {
		_ = hs.Close()
		_ = rdb.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return &Server{http: hs, ops: ops, health: health, closer: rdb.Close}, nil
}

// Addr is the bound API address.
func (s *Server) Addr() string { return s.http.Addr() }

// OpsAddr is the bound ops listener's address.
func (s *Server) OpsAddr() string { return s.ops.Addr() }

// Serve serves the API port and the ops listener until ctx ends: readiness
// fails first, then in-flight requests finish, then the Redis client closes.
// Either listener failing stops both.
func (s *Server) Serve(ctx context.Context) error {
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			s.health.Drain()
			cancel()
		case <-sctx.Done():
		}
	}()
	errs := make(chan error, 2)
	go func() { errs <- s.http.Serve(sctx) }()
	go func() { errs <- s.ops.Serve(sctx) }()
	err := <-errs
	cancel()
	if oerr := <-errs; err == nil {
		err = oerr
	}
	if cerr := s.closer(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}
