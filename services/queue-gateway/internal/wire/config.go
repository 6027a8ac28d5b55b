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
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// OpsAddr is the ops listener (/metrics, /healthz, /readyz, pprof when
	// PPROF_ENABLED): for Prometheus, probes and operators, never routed
	// to the world.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9080"`
	config.HTTP
	config.Log
	config.Redis
	config.Auth
	config.Proxies
	config.Tickets
	// EntryTokens signs the passes a queue that fails OPEN hands out
	// while Redis is down (ENTRY_TOKEN_KEYS, the dispatcher's and the
	// order-service's list).
	config.EntryTokens
	// EnterRateLimitPerIP is enters per second per client IP; 0 turns it off.
	EnterRateLimitPerIP int `env:"ENTER_RATE_LIMIT_PER_IP" envDefault:"10"`
	// ClientIPv6Prefix is the prefix length an IPv6 client is limited by:
	// it may take a new address of its /64 for every request.
	ClientIPv6Prefix int `env:"CLIENT_IPV6_PREFIX" envDefault:"64"`
	// LocalLimits: PUBLIC_RATE_LIMIT_PER_IP (GET /api/v1/queues/{q}) and
	// LOCAL_LIMIT_KEYS, in this replica's memory.
	config.LocalLimits
	// PositionRatePerUser is position polls and leaves per second per user
	// that reach the engine (and Redis), in this replica's memory; polls
	// the admission frontier answers cost no Redis and are not counted.
	// 0 turns it off.
	PositionRatePerUser int `env:"POSITION_RATE_LIMIT_PER_USER" envDefault:"20"`
	// EnterChallengeSecret signs the proof-of-work challenges of queues
	// that ask for one; every replica needs the same. Unset, a key is
	// derived from AUTH_JWT_SECRET (required then, so JWKS-only deployments
	// must set it).
	EnterChallengeSecret string `env:"ENTER_CHALLENGE_SECRET" json:"-"`
	// EnterChallengeTTL is how long a challenge may be solved and used.
	EnterChallengeTTL time.Duration `env:"ENTER_CHALLENGE_TTL" envDefault:"2m"`

	// The waiting-room page: where a browser reaches the other services
	// (also what its Content-Security-Policy lets it connect to), and the
	// queue / shows without ?queue=.
	OrderServicePublicURL        string `env:"ORDER_SERVICE_PUBLIC_URL" envDefault:"http://localhost:8081"`
	NotificationServicePublicURL string `env:"NOTIFICATION_SERVICE_PUBLIC_URL" envDefault:"http://localhost:8082"`
	DefaultQueue                 string `env:"DEFAULT_QUEUE" envDefault:"demo"`
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
