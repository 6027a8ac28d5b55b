// Command notification-service pushes "your turn" to waiting browsers over
// Server-Sent Events, fed by the token events on RabbitMQ.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/wire"
)

func main() {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := wire.Run(ctx)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "notification-service:", err)
		os.Exit(1)
	}
}
