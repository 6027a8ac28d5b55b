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
	// HTTPAddr is the API listener's address, the port the ingress routes
	// to. (The dispatcher serves no API and does not read it.)
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8082"`
	// OpsAddr is the ops listener: /metrics, /healthz, /readyz (a 503 says
	// which checks failed and why) and, when PPROF_ENABLED, /debug/pprof/,
	// for Prometheus, probes and operators. Keep it off the public network.
	// Always on; tests use 127.0.0.1:0 and read the bound address.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9082"`
	config.HTTP
	config.Log
	config.Redis
	config.AMQP
	config.Auth
	config.Proxies
	config.CORS
	config.Tickets
	// MaxStreamsPerIP caps open streams per client address (an IPv4
	// address or an IPv6 network of CLIENT_IPV6_PREFIX bits) on this
	// replica: beyond it 429 rate-limited with Retry-After 10, counted in
	// waitingroom_sse_streams_rejected_total{reason="ip_cap"}. 0 means no
	// cap.
	MaxStreamsPerIP int `env:"SSE_MAX_STREAMS_PER_IP" envDefault:"20"`
	// MaxStreamsPerUser caps one user's (sub's) open streams over all
	// queues on this replica: three tabs are fine, a fourth is refused (429,
	// reason user_cap). It is checked after the per-address cap. Both caps
	// count one replica's streams: the hub is per process. 0 means no cap.
	MaxStreamsPerUser int `env:"SSE_MAX_STREAMS_PER_USER" envDefault:"3"`
	// ClientIPv6Prefix is the prefix length, 32 to 128, an IPv6 client is
	// counted by in per-address limits and caps: one subscriber holds at
	// least a /64 and may pick a fresh address of it for every request;
	// 128 counts every address alone. An IPv4-mapped address counts as the
	// IPv4 address. Keys look like 203.0.113.7 and 2001:db8:1:2::/64
	// (clientkey.Of).
	ClientIPv6Prefix int `env:"CLIENT_IPV6_PREFIX" envDefault:"64"`
	// Heartbeat is how often a stream gets a heartbeat comment.
	Heartbeat time.Duration `env:"SSE_HEARTBEAT" envDefault:"15s"`
	// PositionEvery is how often a stream gets a position event.
	PositionEvery time.Duration `env:"SSE_POSITION_INTERVAL" envDefault:"3s"`
	// Buffer is how many events a stream may have waiting before it is
	// dropped as too slow.
	Buffer int `env:"SSE_BUFFER" envDefault:"32"`
	// WriteTimeout is each frame's write deadline: a stream whose socket
	// takes nothing for this long is dropped. HTTP_WRITE_TIMEOUT does not
	// end streams.
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
