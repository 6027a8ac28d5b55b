// Package service is the process shell every binary shares: signal
// handling, configuration from the environment, the JSON logger, one exit.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/logging"
	"github.com/waitingroom/waitingroom/pkg/redisstore"
)

// Main runs run until SIGINT or SIGTERM and exits non-zero on its error. A
// service's main is one call to it.
func Main(name string, run func(context.Context) error) {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx)
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
}

// Run loads C from the environment, builds the service's JSON logger (and
// routes go-redis's own log lines to it), then calls serve.
func Run[C any, P Configured[C]](ctx context.Context, name string, serve func(context.Context, C, *slog.Logger) error) error {
	var cfg C
	if err := config.Load(P(&cfg)); err != nil {
		return err
	}
	log, err := logging.New(os.Stdout, name, P(&cfg).LogLevel())
	if err != nil {
		return err
	}
	redisstore.SetLogger(log)
	return serve(ctx, cfg, log)
}
