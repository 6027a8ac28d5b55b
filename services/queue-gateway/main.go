// Command queue-gateway serves the waiting room's public REST API: enter,
// position and leave, the queue admin API, and the waiting-room page.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/gateway"
)

func main() {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := gateway.Run(ctx)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "queue-gateway:", err)
		os.Exit(1)
	}
}
