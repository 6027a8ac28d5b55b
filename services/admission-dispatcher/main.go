// Command admission-dispatcher admits the head of every waiting line at the
// queue's rate, under a fenced per-queue lease, relays the admission events
// to RabbitMQ and gives tokens back when orders fail.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/wire"
)

func main() {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := wire.Run(ctx)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "admission-dispatcher:", err)
		os.Exit(1)
	}
}
