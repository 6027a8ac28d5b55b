// Package service is the process shell every binary shares: signal
// handling, configuration from the environment, the JSON logger, one exit.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/logging"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// Main builds the service called name with newService (see Run) and runs
// it until SIGINT or SIGTERM, and exits non-zero on its error. A service's
// main is one call to it: service.Main("order-service", wire.New).
func Main[C any, P Configured[C], R Runner](name string, newService func(context.Context, C, *slog.Logger) (R, error)) {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := Run[C, P](ctx, name, newService)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Configured is a service configuration: it embeds config.Log.
type Configured[C any] interface {
	*C
	LogLevel() string
	PprofAddress() string
}

// Runner is a wired service: its constructor bound the listeners and made
// the connections; Run runs its components until ctx ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Run loads C from the environment, builds the service's JSON logger (and
// routes go-redis's own log lines to it), sets tracing up from the OTEL_*
// environment (setupTracing; spans are flushed on the way out), starts the profiling server when
// PPROF_ADDR is set, then builds the service with newService and runs it.
// (PPROF_ENABLED, the other way to profile, mounts pprof on the ops
// listener, which the service builds.)
func Run[C any, P Configured[C], R Runner](ctx context.Context, name string, newService func(context.Context, C, *slog.Logger) (R, error)) error {
	var cfg C
	if err := config.Load(P(&cfg)); err != nil {
		return err
	}
	log, err := logging.New(os.Stdout, name, P(&cfg).LogLevel())
	if err != nil {
		return err
	}
	redisstore.SetLogger(log)
	shutdown, err := setupTracing(ctx, name, "")
	if err != nil {
		return err
	}
	defer func() {
		// Flush the spans still buffered, within a bound of its own: ctx
		// has ended by now.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}()
	if telemetry.Enabled() {
		log.Info("tracing on", "exporter", cmp.Or(os.Getenv("OTEL_TRACES_EXPORTER"), "otlp"),
			"sampler", cmp.Or(os.Getenv("OTEL_TRACES_SAMPLER"), "parentbased_always_on"))
	}
	if addr := P(&cfg).PprofAddress(); addr != "" {
		stop, err := servePprof(addr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	s, err := newService(ctx, cfg, log)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}

// servePprof serves /debug/pprof/ on addr until stop is called. The
// listener is bound before it returns, so a taken port fails the start.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("PPROF_ADDR: %w", err)
	}
	// No write timeout: a CPU profile or trace streams for its ?seconds=.
	srv := &http.Server{Handler: httpserver.Pprof(), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server stopped", "err", err)
		}
	}()
	log.Warn("profiling endpoints are served; keep PPROF_ADDR off public networks", "addr", ln.Addr().String())
	return func() { _ = srv.Close(); <-done }, nil
}
