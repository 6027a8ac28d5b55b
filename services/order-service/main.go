// Command order-service takes orders behind entry tokens: each token is
// consumed exactly once, stock never goes below zero, and a failed order gives
// the token back.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/waitingroom/waitingroom/services/order-service/internal/wire"
)

func main() {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := wire.Run(ctx)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "order-service:", err)
		os.Exit(1)
	}
}
