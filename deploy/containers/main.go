// Command containers starts one server in Docker for the tests of one test
// binary: pkg/testenv runs it when nothing answers at REDIS_URL, DATABASE_URL
// or AMQP_URL, so that testcontainers-go and the Docker client are
// dependencies of this module only, not of pkg and every service.
//
//	go run github.com/waitingroom/waitingroom/deploy/containers <redis|postgres|rabbitmq>
//
// Once the server is ready it prints one line, host:port, on stdout. It keeps
// the container until its stdin reaches end of file (the test binary that
// started it, holding the other end, exited) or it receives SIGINT or
// SIGTERM, then removes the container. Errors go to stderr with exit status
// 1; a missing Docker engine is one ("no Docker engine: ...").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, done := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:], os.Stdin, os.Stdout, dockerStart)
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "containers:", err)
		os.Exit(1)
	}
}

// startFunc starts srv and returns its host:port and a function that removes
// it. dockerStart is the real one; tests pass a fake.
type startFunc func(ctx context.Context, srv server) (addr string, stop func(context.Context) error, err error)

// startTimeout bounds pulling the image and waiting for the server.
const startTimeout = 3 * time.Minute

// stopTimeout bounds removing the container.
const stopTimeout = time.Minute

func realMain(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, start startFunc) error {
	if len(args) != 1 {
		return errors.New("usage: containers <redis|postgres|rabbitmq>")
	}
	srv, ok := servers[args[0]]
	if !ok {
		return fmt.Errorf("unknown server %q: want redis, postgres or rabbitmq", args[0])
	}

	// The end of stdin is the test binary's exit: it ends the wait below
	// and also a start still in progress. The reader lives until then,
	// which is the life of this process.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()

	startCtx, cancelStart := context.WithTimeout(ctx, startTimeout)
	addr, stop, err := start(startCtx, srv)
	cancelStart()
	if stop != nil {
		// A start that failed half way may still have created the
		// container; it goes too.
		defer func() {
			stopCtx, cancelStop := context.WithTimeout(context.Background(), stopTimeout)
			defer cancelStop()
			if serr := stop(stopCtx); serr != nil {
				fmt.Fprintf(os.Stderr, "containers: remove %s: %v\n", srv.image, serr)
			}
		}()
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, addr); err != nil {
		return fmt.Errorf("write address: %w", err)
	}
	<-ctx.Done()
	return nil
}
