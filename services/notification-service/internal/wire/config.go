// Package wire builds the notification-service from its configuration.
package wire

import (
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/config"
)

// Config is the notification-service's environment.
type Config struct {
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8082"`
	// OpsAddr is the ops listener (/metrics, /healthz, /readyz, pprof when
	// PPROF_ENABLED): for Prometheus, probes and operators, never routed
	// to the world.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9082"`
	// HTTP's write timeout does not end event streams: each frame sets
	// its own deadline (SSE_WRITE_TIMEOUT).
	config.HTTP
	config.Log
	config.Redis
	config.AMQP
	config.Auth
	config.Proxies
	config.CORS
	config.Tickets
	// MaxStreamsPerIP caps open streams per client address; 0 = no cap.
	MaxStreamsPerIP int `env:"SSE_MAX_STREAMS_PER_IP" envDefault:"20"`
	// MaxStreamsPerUser caps one user's open streams over all queues on
	// this replica; 0 = no cap.
	MaxStreamsPerUser int `env:"SSE_MAX_STREAMS_PER_USER" envDefault:"3"`
	// ClientIPv6Prefix is the prefix length SSE_MAX_STREAMS_PER_IP counts
	// an IPv6 client by.
	ClientIPv6Prefix int           `env:"CLIENT_IPV6_PREFIX" envDefault:"64"`
	Heartbeat        time.Duration `env:"SSE_HEARTBEAT" envDefault:"15s"`
	PositionEvery    time.Duration `env:"SSE_POSITION_INTERVAL" envDefault:"3s"`
	// Buffer is how many events a stream may have waiting before it is
	// dropped as too slow.
	Buffer       int           `env:"SSE_BUFFER" envDefault:"32"`
	WriteTimeout time.Duration `env:"SSE_WRITE_TIMEOUT" envDefault:"10s"`
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, auth.CheckConfig(c.Auth), c.Proxies.Check(), c.CORS.Check(), c.HTTP.Check())
	if c.MaxStreamsPerIP < 0 || c.MaxStreamsPerUser < 0 || c.Buffer < 1 || c.Heartbeat <= 0 || c.PositionEvery <= 0 || c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("SSE_* settings must be positive (SSE_MAX_STREAMS_PER_IP and _PER_USER may be 0)"))
	}
	errs = append(errs, clientkey.CheckIPv6Prefix(c.ClientIPv6Prefix))
	return errors.Join(errs...)
}
