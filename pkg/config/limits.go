package config

import (
	"errors"

	"github.com/waitingroom/waitingroom/pkg/throttle"
)

// LocalLimits are the in-process limits every service that serves people
// keeps in its own memory (pkg/throttle): answered without Redis or a
// database, so they hold when those are slow, and per replica.
type LocalLimits struct {
	// PublicRatePerIP is requests per second per client address (an IPv4
	// address or an IPv6 network of CLIENT_IPV6_PREFIX bits, clientkey.Of)
	// to the public routes that need no login (burst the same), counted in
	// this replica's memory: beyond it 429 with Retry-After, with no Redis
	// or Postgres call. 0 turns it off. Raise it for large NATs.
	PublicRatePerIP int `env:"PUBLIC_RATE_LIMIT_PER_IP" envDefault:"20"`
	// Keys bounds the users or addresses each such limit remembers, at
	// least 1,000. A key whose bucket is full and has nothing in flight is
	// forgotten at no cost; past the bound, others with nothing in flight
	// are forgotten at random (each may then take a fresh burst).
	Keys int `env:"LOCAL_LIMIT_KEYS" envDefault:"100000"`
}

// Check refuses negative limits and a key bound under 1,000.
func (l LocalLimits) Check() error {
	if l.PublicRatePerIP < 0 {
		return errors.New("PUBLIC_RATE_LIMIT_PER_IP must be 0 (off) or positive")
	}
	if l.Keys < 1000 {
		return errors.New("LOCAL_LIMIT_KEYS must be at least 1000")
	}
	return nil
}

// Limiter is a per-key limiter of perSec a second (burst the same) and at
// most inFlight at once, remembering l.Keys keys; nil when both are 0 (off).
func (l LocalLimits) Limiter(perSec, inFlight int) (*throttle.Limiter, error) {
	if perSec == 0 && inFlight == 0 {
		return nil, nil
	}
	return throttle.New(throttle.Options{PerSec: float64(perSec), InFlight: inFlight, MaxKeys: l.Keys})
}
