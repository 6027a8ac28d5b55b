// Package wire builds the notification-service from its configuration.
package wire

import (
	"errors"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/services/notification-service/internal/push"
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
	Push
}

// Push is Web Push: "your turn" to a person whose tab is closed. It is on
// when the VAPID key pair and the subject are set (all three or none).
type Push struct {
	// PublicKey is the VAPID public key, the uncompressed P-256 point in
	// base64url (what browsers take as applicationServerKey); it must be
	// PUSH_VAPID_PRIVATE_KEY's. Keep one pair for good: a browser's
	// subscription is bound to the key it was made with.
	PublicKey string `env:"PUSH_VAPID_PUBLIC_KEY"`
	// PrivateKey is the VAPID private key, the P-256 scalar in base64url.
	// A secret: from a Secret, never in a manifest.
	PrivateKey string `env:"PUSH_VAPID_PRIVATE_KEY" json:"-"`
	// Subject is who the push services may contact about the pushes: a
	// mailto: or https: URL (RFC 8292).
	Subject string `env:"PUSH_SUBJECT"`
	// EndpointHosts are the push services sent to: a subscription whose
	// endpoint is anywhere else is refused (400), so nobody can make the
	// service POST into the shop's own network. "*.suffix" is any host
	// under suffix. The default is the browsers' push services: Chrome,
	// Firefox, Edge and Safari.
	EndpointHosts []string `env:"PUSH_ENDPOINT_HOSTS" envDefault:"fcm.googleapis.com,*.push.services.mozilla.com,*.notify.windows.com,*.push.apple.com"`
	// LoopbackEndpoints also allows http endpoints on 127.0.0.1, ::1 and
	// localhost: for tests and a developer's machine, never production.
	LoopbackEndpoints bool `env:"PUSH_ALLOW_LOOPBACK_ENDPOINTS" envDefault:"false"`
	// Rate is the pushes per second this replica sends to one push service
	// host; a 429 or 503 with Retry-After pauses that host (a minute at
	// most). The admission rate bounds the pushes (a few devices per
	// admitted person) well below what the push services take.
	Rate float64 `env:"PUSH_RATE_PER_HOST" envDefault:"200"`
	// Burst is how many pushes to one host may go at once, above
	// PUSH_RATE_PER_HOST.
	Burst int `env:"PUSH_BURST" envDefault:"50"`
	// Queue is the quorum queue the replicas share for pushing: each
	// TokenIssued reaches one of them. Deployments on one RabbitMQ vhost
	// with different exchanges need different names.
	Queue string `env:"PUSH_QUEUE" envDefault:"notification.push"`
	// Concurrency is how many TokenIssued this replica pushes at once
	// (the prefetch of PUSH_QUEUE).
	Concurrency int `env:"PUSH_CONCURRENCY" envDefault:"64"`
	// SubscriptionTTL is how long a subscription is kept while its person
	// waits, renewed by each subscribe; once "your turn" was pushed, the
	// subscription ends with the token.
	SubscriptionTTL time.Duration `env:"PUSH_SUBSCRIPTION_TTL" envDefault:"6h"`
	// DevicesPerUser is the most subscriptions one user keeps in one
	// queue; a newer device evicts the oldest.
	DevicesPerUser int `env:"PUSH_DEVICES_PER_USER" envDefault:"3"`
	// Attempts is how often one device is tried on a 429, a 5xx or a
	// network error before its push is given up.
	Attempts int `env:"PUSH_ATTEMPTS" envDefault:"3"`
}

// On reports whether push is configured.
func (p Push) On() bool { return p.PublicKey != "" || p.PrivateKey != "" || p.Subject != "" }

// Check validates the push settings.
func (p Push) Check() error {
	if !p.On() {
		return nil
	}
	var errs []error
	if p.PublicKey == "" || p.PrivateKey == "" || p.Subject == "" {
		errs = append(errs, errors.New("PUSH_VAPID_PUBLIC_KEY, PUSH_VAPID_PRIVATE_KEY and PUSH_SUBJECT go together: set all three, or none"))
	} else {
		errs = append(errs, push.CheckKeys(p.PublicKey, p.PrivateKey), push.CheckSubject(p.Subject))
	}
	if p.Queue == "" || len(p.Queue) > 200 {
		errs = append(errs, errors.New("PUSH_QUEUE: a queue name of 1 to 200 bytes"))
	}
	if len(p.EndpointHosts) == 0 && !p.LoopbackEndpoints {
		errs = append(errs, errors.New("PUSH_ENDPOINT_HOSTS: empty, so no push could go anywhere"))
	}
	if p.Rate <= 0 || p.Burst < 1 || p.Concurrency < 1 || p.Concurrency > 65535 || p.SubscriptionTTL < time.Minute || p.DevicesPerUser < 1 || p.Attempts < 1 {
		errs = append(errs, errors.New("PUSH_RATE_PER_HOST, _BURST, _CONCURRENCY (at most 65535), _DEVICES_PER_USER and _ATTEMPTS must be positive, PUSH_SUBSCRIPTION_TTL at least 1m"))
	}
	return errors.Join(errs...)
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, auth.CheckConfig(c.Auth), c.Proxies.Check(), c.CORS.Check(), c.HTTP.Check())
	if c.MaxStreamsPerIP < 0 || c.MaxStreamsPerUser < 0 || c.Buffer < 1 || c.Heartbeat <= 0 || c.PositionEvery <= 0 || c.WriteTimeout <= 0 {
		errs = append(errs, errors.New("SSE_* settings must be positive (SSE_MAX_STREAMS_PER_IP and _PER_USER may be 0)"))
	}
	errs = append(errs, clientkey.CheckIPv6Prefix(c.ClientIPv6Prefix), c.Push.Check())
	return errors.Join(errs...)
}
