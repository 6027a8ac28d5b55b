// Package wire wires the queue-gateway together from its configuration.
package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/challenge"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/services/queue-gateway/internal/web"
)

// Config is the queue-gateway's environment.
type Config struct {
	// HTTPAddr is the API listener's address, the port the ingress routes
	// to. (The dispatcher serves no API and does not read it.)
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// OpsAddr is the ops listener: /metrics, /healthz, /readyz (a 503 says
	// which checks failed and why) and, when PPROF_ENABLED, /debug/pprof/,
	// for Prometheus, probes and operators. Keep it off the public network.
	// Always on; tests use 127.0.0.1:0 and read the bound address.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9080"`
	config.HTTP
	config.Log
	config.Redis
	config.Auth
	config.Proxies
	config.Tickets
	// EntryTokens: the gateway signs with ENTRY_TOKEN_KEYS the passes a
	// queue that fails OPEN hands out while Redis is down.
	config.EntryTokens
	// EnterRateLimitPerIP is enters per second per client (GCRA in Redis,
	// shared by the replicas): an IPv4 address, or an IPv6 network of
	// CLIENT_IPV6_PREFIX bits. Challenges get a bucket of their own at the
	// same rate. 0 turns it off.
	EnterRateLimitPerIP int `env:"ENTER_RATE_LIMIT_PER_IP" envDefault:"10"`
	// ClientIPv6Prefix is the prefix length, 32 to 128, an IPv6 client is
	// counted by in per-address limits and caps: one subscriber holds at
	// least a /64 and may pick a fresh address of it for every request;
	// 128 counts every address alone. An IPv4-mapped address counts as the
	// IPv4 address. Keys look like 203.0.113.7 and 2001:db8:1:2::/64
	// (clientkey.Of).
	ClientIPv6Prefix int `env:"CLIENT_IPV6_PREFIX" envDefault:"64"`
	// LocalLimits: PUBLIC_RATE_LIMIT_PER_IP limits the gateway's public
	// route, GET /api/v1/queues/{q}.
	config.LocalLimits
	// PositionRatePerUser is position polls and leaves per second per user
	// (burst the same) that reach the engine (and Redis), counted in this
	// replica's memory; a poll the admission frontier answers (a ticket far
	// from the front) costs no Redis and is not counted. 0 turns it off.
	PositionRatePerUser int `env:"POSITION_RATE_LIMIT_PER_USER" envDefault:"20"`
	// EnterChallengeSecret is the key, at least 32 bytes, that signs the
	// proof-of-work challenges of queues that ask for one; every replica
	// needs the same. Unset, a key is derived from AUTH_JWT_SECRET (from the
	// dev secret in dev mode); it is required when AUTH_JWT_SECRET is not
	// set, so JWKS-only deployments must set it.
	EnterChallengeSecret string `env:"ENTER_CHALLENGE_SECRET" json:"-"`
	// EnterChallengeTTL is how long a challenge may be solved and used,
	// from 1s to 1h.
	EnterChallengeTTL time.Duration `env:"ENTER_CHALLENGE_TTL" envDefault:"2m"`
	// OrderServicePublicURL is the order-service as a browser reaches it:
	// where the waiting-room page sends orders, and what its
	// Content-Security-Policy lets it connect to.
	OrderServicePublicURL string `env:"ORDER_SERVICE_PUBLIC_URL" envDefault:"http://localhost:8081"`
	// NotificationServicePublicURL is the notification-service as a
	// browser reaches it: where the waiting-room page opens its event
	// stream, and what its Content-Security-Policy lets it connect to.
	NotificationServicePublicURL string `env:"NOTIFICATION_SERVICE_PUBLIC_URL" envDefault:"http://localhost:8082"`
	// DefaultQueue is the queue the waiting-room page at / shows without
	// ?queue=.
	DefaultQueue string `env:"DEFAULT_QUEUE" envDefault:"demo"`
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, auth.CheckConfig(c.Auth), c.Proxies.Check(), c.HTTP.Check())
	if c.EnterRateLimitPerIP < 0 {
		errs = append(errs, errors.New("ENTER_RATE_LIMIT_PER_IP must be 0 (off) or positive"))
	}
	errs = append(errs, clientkey.CheckIPv6Prefix(c.ClientIPv6Prefix), c.LocalLimits.Check())
	if c.PositionRatePerUser < 0 {
		errs = append(errs, errors.New("POSITION_RATE_LIMIT_PER_USER must be 0 (off) or positive"))
	}
	if _, err := c.challengeSigner(); err != nil {
		errs = append(errs, err)
	}
	if err := c.page().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// challengeSigner is the enter-challenge signer: ENTER_CHALLENGE_SECRET, or
// a key derived from the JWT secret (the dev secret in dev mode).
func (c *Config) challengeSigner() (*challenge.Signer, error) {
	var key []byte
	switch {
	case c.EnterChallengeSecret != "":
		if len(c.EnterChallengeSecret) < challenge.MinKeyBytes {
			return nil, fmt.Errorf("ENTER_CHALLENGE_SECRET must be at least %d bytes", challenge.MinKeyBytes)
		}
		key = []byte(c.EnterChallengeSecret)
	case c.JWTSecret != "":
		key = challenge.DeriveKey(c.JWTSecret)
	case c.DevMode:
		key = challenge.DeriveKey(auth.DevSecret)
	default:
		return nil, errors.New("ENTER_CHALLENGE_SECRET is required when AUTH_JWT_SECRET is not set")
	}
	s, err := challenge.NewSigner(key, c.EnterChallengeTTL)
	if err != nil {
		return nil, fmt.Errorf("ENTER_CHALLENGE_TTL: %w", err)
	}
	return s, nil
}

// page is the waiting-room page's configuration; empty fields take the
// page's defaults.
func (c *Config) page() web.Config {
	return web.Config{
		OrderServiceURL:        c.OrderServicePublicURL,
		NotificationServiceURL: c.NotificationServicePublicURL,
		DefaultQueue:           c.DefaultQueue,
		DevMode:                c.DevMode,
	}
}
