package main

import (
	"context"
	"fmt"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// server is what it takes to run one kind of server in a container.
type server struct {
	image string
	port  string // the container port to publish, "6379/tcp"
	env   map[string]string
	wait  wait.Strategy // when the server is ready
}

var servers = map[string]server{
	"redis": {
		image: "redis:7-alpine",
		port:  "6379/tcp",
		wait:  wait.ForListeningPort("6379/tcp"),
	},
	"postgres": {
		image: "postgres:15-alpine",
		port:  "5432/tcp",
		env:   map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"},
		// The entrypoint starts the server twice (init, then for real).
		wait: wait.ForLog("database system is ready to accept connections").WithOccurrence(2).
			WithStartupTimeout(2 * time.Minute),
	},
	"rabbitmq": {
		image: "rabbitmq:3-management",
		port:  "5672/tcp",
		wait:  wait.ForLog("Server startup complete").WithStartupTimeout(2 * time.Minute),
	},
}

// dockerStart runs srv with testcontainers-go. testcontainers panics when it
// finds no Docker host, so the start recovers and reports it as an error.
func dockerStart(ctx context.Context, srv server) (addr string, stop func(context.Context) error, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine: %v", r)
		}
	}()
	if err := dockerAvailable(ctx); err != nil {
		return "", nil, err
	}
	opts := []testcontainers.ContainerCustomizer{
		testcontainers.WithExposedPorts(srv.port),
		testcontainers.WithWaitStrategy(srv.wait),
	}
	if len(srv.env) > 0 {
		opts = append(opts, testcontainers.WithEnv(srv.env))
	}
	ctr, err := testcontainers.Run(ctx, srv.image, opts...)
	if ctr != nil {
		stop = func(ctx context.Context) error {
			return testcontainers.TerminateContainer(ctr, testcontainers.StopContext(ctx))
		}
	}
	if err != nil {
		return "", stop, fmt.Errorf("start %s: %w", srv.image, err)
	}
	addr, err = ctr.PortEndpoint(ctx, srv.port, "")
	if err != nil {
		return "", stop, fmt.Errorf("%s: published port of %s: %w", srv.image, srv.port, err)
	}
	return addr, stop, nil
}

// dockerAvailable reports whether a Docker engine answers, before a start
// would wait on one that does not.
func dockerAvailable(ctx context.Context) error {
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Health(ctx); err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	return nil
}
