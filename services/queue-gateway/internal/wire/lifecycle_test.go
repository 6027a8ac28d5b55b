package wire

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// Started and stopped in process: nothing left behind, and a listener that
// fails reaches Run's caller.
func TestServiceLifecycle(t *testing.T) {
	cfg := Config{HTTPAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", HTTP: config.HTTP{ShutdownTimeout: 10 * time.Second}, EnterChallengeTTL: time.Minute}
	cfg.Redis.URL = testenv.RedisURL(t)
	cfg.DevMode = true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	testenv.CheckLifecycle(t, func(ctx context.Context) (*Service, error) { return New(ctx, cfg, log) },
		func(s *Service) { _ = s.API.Close() }, "api listener")
}
