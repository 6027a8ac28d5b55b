// Package wire builds the notification-service from its configuration.
package wire

import (
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/config"
)

// Config is the notification-service's environment.
type Config struct {
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8082"`
	config.Log
	config.Redis
	config.AMQP
	config.Auth
	CORSAllowedOrigins []string `env:"CORS_ALLOWED_ORIGINS" envDefault:"http://localhost:8080,http://127.0.0.1:8080"`
	TrustedProxies     []string `env:"TRUSTED_PROXIES"`
	// MaxStreamsPerIP caps open streams per client address; 0 = no cap.
	MaxStreamsPerIP int           `env:"SSE_MAX_STREAMS_PER_IP" envDefault:"20"`
	Heartbeat       time.Duration `env:"SSE_HEARTBEAT" envDefault:"15s"`
	PositionEvery   time.Duration `env:"SSE_POSITION_INTERVAL" envDefault:"3s"`
	// Buffer is how many events a stream may have waiting before it is
	// dropped as too slow.
	Buffer          int           `env:"SSE_BUFFER" envDefault:"32"`
	WriteTimeout    time.Duration `env:"SSE_WRITE_TIMEOUT" envDefault:"10s"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"10s"`
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, auth.CheckConfig(c.Auth), auth.CheckProxies(c.TrustedProxies))
	if c.MaxStreamsPerIP < 0 || c.Buffer < 1 || c.Heartbeat <= 0 || c.PositionEvery <= 0 || c.WriteTimeout <= 0 || c.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("SSE_* settings and SHUTDOWN_TIMEOUT must be positive (SSE_MAX_STREAMS_PER_IP may be 0)"))
	}
	return errors.Join(errs...)
}
