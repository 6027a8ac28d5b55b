// Package testenv gives integration tests the real servers they talk to.
//
// A server is found at the URL its environment variable names (REDIS_URL, ...),
// defaulting to localhost. When nothing answers there and a Docker engine does,
// one container per test binary is started with testcontainers-go. Otherwise
// the test fails, saying how to start the server: a missing server never
// skips a test silently.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// container is a server started in Docker, shared by the tests of one binary
// and removed by testcontainers' reaper when the binary exits.
type container struct {
	once sync.Once
	addr string // host:port
	err  error
}

func (c *container) start(image, port string, cmd []string, env map[string]string, waitFor wait.Strategy) (string, error) {
	c.once.Do(func() {
		if err := dockerAvailable(); err != nil {
			c.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		opts := []testcontainers.ContainerCustomizer{
			testcontainers.WithExposedPorts(port),
			testcontainers.WithWaitStrategy(waitFor),
		}
		if len(cmd) > 0 {
			opts = append(opts, testcontainers.WithCmd(cmd...))
		}
		if len(env) > 0 {
			opts = append(opts, testcontainers.WithEnv(env))
		}
		ctr, err := testcontainers.Run(ctx, image, opts...)
		if err != nil {
			c.err = fmt.Errorf("start %s: %w", image, err)
			return
		}
		c.addr, c.err = ctr.PortEndpoint(ctx, port, "")
	})
	return c.addr, c.err
}

// dockerAvailable reports whether a Docker engine answers. testcontainers
// panics when none is configured, so the probe recovers.
func dockerAvailable() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Health(ctx); err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	return nil
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// ID returns an id unique to this test run, usable as a queue id, a database
// name or an exchange suffix: the test's name, lower-cased, plus random hex.
func ID(t testing.TB) string {
	name := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 40 {
		name = name[len(name)-40:]
		name = strings.TrimLeft(name, "-")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	if name == "" {
		name = "t"
	}
	return name + "-" + hex.EncodeToString(b)
}
