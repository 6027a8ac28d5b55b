// Package gateway wires the queue-gateway together from its configuration.
package gateway

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/config"
)

// Config is the queue-gateway's environment.
type Config struct {
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	config.Log
	config.Redis
	config.Auth
	// EnterRateLimitPerIP is enters per second per client IP; 0 turns it off.
	EnterRateLimitPerIP int `env:"ENTER_RATE_LIMIT_PER_IP" envDefault:"10"`
	// TrustedProxies are CIDRs whose X-Forwarded-For is believed.
	TrustedProxies []string `env:"TRUSTED_PROXIES"`
	// ShutdownTimeout bounds the graceful shutdown; keep it below the pod's
	// terminationGracePeriodSeconds.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	var errs []error
	if c.JWTSecret == "" && !c.DevMode {
		errs = append(errs, errors.New("AUTH_JWT_SECRET is required (or AUTH_DEV_MODE=true for local use)"))
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < auth.MinSecretBytes {
		errs = append(errs, fmt.Errorf("AUTH_JWT_SECRET must be at least %d bytes", auth.MinSecretBytes))
	}
	if c.EnterRateLimitPerIP < 0 {
		errs = append(errs, errors.New("ENTER_RATE_LIMIT_PER_IP must be 0 (off) or positive"))
	}
	for _, p := range c.TrustedProxies {
		if _, _, err := net.ParseCIDR(p); err != nil && net.ParseIP(p) == nil {
			errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %q is neither a CIDR nor an IP", p))
		}
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("SHUTDOWN_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// secret is the JWT key in use: the configured one, else the dev secret.
func (c *Config) secret() string {
	if c.JWTSecret != "" {
		return c.JWTSecret
	}
	return auth.DevSecret
}
