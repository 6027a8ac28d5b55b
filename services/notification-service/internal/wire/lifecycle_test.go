package wire

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/waitingroom/waitingroom/pkg/testenv"
)

// Started and stopped in process: nothing left behind, and a listener that
// fails reaches Run's caller.
func TestServiceLifecycle(t *testing.T) {
	exchange := "test." + testenv.ID(t)
	t.Cleanup(func() { testenv.DeleteAMQPTopology(testenv.AMQPURL(t), exchange) })
	cfg := testConfig(t, exchange)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	testenv.CheckLifecycle(t, func(ctx context.Context) (*Service, error) { return New(ctx, cfg, log) },
		func(s *Service) { _ = s.API.Close() }, "api listener")
}
