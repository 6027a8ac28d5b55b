// Package config loads a service's configuration from environment variables.
//
// Every service declares one struct with `env` tags and embeds the shared pieces
// below, so a variable has the same name and meaning in every service.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Redis names the Redis deployment: a single node, Sentinel or Cluster.
type Redis struct {
	// URL is the Redis deployment, one redis.UniversalClient whichever it
	// is: redis:// or rediss:// for a single node;
	// redis+sentinel://h1:26379,h2:26379/master for Sentinel; and
	// redis+cluster:// or a comma-separated list of seed nodes
	// (h1:7000,h2:7001) for Cluster. See redisstore.NewClient.
	URL string `env:"REDIS_URL" envDefault:"redis://localhost:6379/0" json:"-"`
	// WaitReplicas is how many replicas must hold a change before it is
	// acknowledged: a place, a consumed or restored token, a lease grant
	// and a line's epoch, and the admissions before the relay publishes
	// their events. The change is followed by WAIT on the same connection,
	// in the same round trip; see docs/DESIGN.md "Replicas and failover".
	// A number, or "all": every replica the primary has streaming at the
	// time (INFO replication, state=online, read at most every 500 ms off
	// the request path; at least one), so whichever is promoted holds it.
	// Unset: "all" with a redis+sentinel:// URL, 0 otherwise (a single
	// node has no replica; set it, to "all", for a Cluster whose masters
	// have replicas).
	WaitReplicas string `env:"REDIS_WAIT_REPLICAS"`
	// WaitTimeout bounds that wait. A change not confirmed within it is
	// answered 503 with Retry-After, and is safe to send again. It must be
	// below 1 s, the client's read timeout (unless REDIS_URL sets
	// read_timeout): a longer WAIT would be cut off as a dead connection.
	// 0 takes the default.
	WaitTimeout time.Duration `env:"REDIS_WAIT_TIMEOUT" envDefault:"250ms"`
}

// AllReplicas is Replicas' answer for "all" (redisstore.AllReplicas).
const AllReplicas = -1

// Replicas is WaitReplicas as a count, AllReplicas for "all", with the
// unset value resolved by the URL. Check reports a value it cannot read.
func (r Redis) Replicas() int {
	switch v := strings.TrimSpace(r.WaitReplicas); {
	case v == "" && strings.Contains(r.URL, "+sentinel://"):
		return AllReplicas
	case v == "":
		return 0
	case strings.EqualFold(v, "all"):
		return AllReplicas
	default:
		n, _ := strconv.Atoi(v)
		return max(n, 0)
	}
}

// Check reports a wait that cannot work: a count that is neither a
// number of 0 or more nor "all", or a timeout that is negative or reaches
// the client's default read timeout (the WAIT would be cut off as a dead
// connection).
func (r Redis) Check() error {
	if v := strings.TrimSpace(r.WaitReplicas); v != "" && !strings.EqualFold(v, "all") {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return fmt.Errorf("REDIS_WAIT_REPLICAS must be a number of 0 or more, or all; got %q", r.WaitReplicas)
		}
	}
	if r.WaitTimeout < 0 || r.WaitTimeout >= time.Second {
		return fmt.Errorf("REDIS_WAIT_TIMEOUT must be above 0 and below 1s, got %s", r.WaitTimeout)
	}
	return nil
}

// Wait is WaitTimeout, or its default (250 ms) when a Redis built in code
// leaves it zero.
func (r Redis) Wait() time.Duration {
	if r.WaitTimeout == 0 {
		return 250 * time.Millisecond
	}
	return r.WaitTimeout
}

// AMQP names the RabbitMQ broker.
type AMQP struct {
	// URL is the broker: one amqp:// or amqps:// URL, or one per cluster
	// node separated by commas
	// (amqp://u:p@rabbit-0:5672/,amqp://u:p@rabbit-1:5672/,amqp://u:p@rabbit-2:5672/).
	// Each connection starts at a random node and moves to the next one
	// that answers, at once; see the README's "The RabbitMQ cluster this
	// expects" and docs/DESIGN.md "Events".
	URL string `env:"AMQP_URL" envDefault:"amqp://guest:guest@localhost:5672/" json:"-"`
	// Exchange is the topic exchange events go through.
	Exchange string `env:"AMQP_EXCHANGE" envDefault:"waitingroom.events"`
}

// Database names the PostgreSQL database.
type Database struct {
	// URL is the order-service's PostgreSQL database.
	URL string `env:"DATABASE_URL" envDefault:"postgres://postgres@localhost:5432/waitingroom?sslmode=disable" json:"-"`
}

// Auth configures JWT verification.
type Auth struct {
	// JWTSecret is the HS256 key, at least 32 bytes, of the user JWTs:
	// sub is the user id, and a role: admin claim opens the admin API.
	// Required unless AUTH_JWKS_URL is set or AUTH_DEV_MODE is true. It
	// may be set together with AUTH_JWKS_URL: both kinds of token are then
	// accepted.
	JWTSecret string `env:"AUTH_JWT_SECRET" json:"-"`
	// JWKSURL, when set, is the identity provider's JSON Web Key Set:
	// RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 and
	// EdDSA tokens are verified against its keys (parsed by
	// MicahParks/jwkset). Each key is pinned to one algorithm, its JWK alg,
	// else its type's (RS256 for RSA, ES256/384/512 by curve, EdDSA for
	// Ed25519); a token whose header names another is refused, so HS256
	// keyed with a public key never passes. A token must name its key
	// (kid). Keys with a use other than sig, RSA keys under 2048 bits, oct
	// keys and unknown types are skipped. Requires AUTH_ISSUER and
	// AUTH_AUDIENCE. Until the first fetch succeeds such tokens get 401 and
	// /readyz fails (check auth). See docs/DESIGN.md "Identity providers".
	JWKSURL string `env:"AUTH_JWKS_URL"`
	// JWKSRefresh is how often the key set is fetched again in the
	// background. A token naming an unknown kid (a rotation) also triggers
	// a fetch, at most one every 10 s: others in those 10 s are refused
	// without a fetch, and tokens arriving while a fetch runs wait for it,
	// at most 5 s. A failed fetch keeps the keys already fetched and is
	// retried after 1 s, 2 s, 4 s and so on up to 30 s. The service starts
	// even when the provider is unreachable: until the first fetch
	// succeeds, JWKS tokens get 401 and /readyz fails (check auth).
	JWKSRefresh time.Duration `env:"AUTH_JWKS_REFRESH" envDefault:"15m"`
	// Issuer, when set, must equal a token's iss claim exactly, an HS256
	// token's too (dev tokens carry it).
	Issuer string `env:"AUTH_ISSUER"`
	// Audience, when set, is a comma-separated list: a token's aud claim
	// must name at least one of them, an HS256 token's too (dev tokens
	// carry all of them).
	Audience []string `env:"AUTH_AUDIENCE" envSeparator:","`
	// MaxTokenAge refuses a token whose lifetime (exp minus iat, or exp
	// minus now without iat; 5 s leeway) is longer: a leaked long-lived
	// token is a standing key to the queue, and one valid until 2100 is
	// refused whoever signed it.
	MaxTokenAge time.Duration `env:"AUTH_MAX_TOKEN_AGE" envDefault:"24h"`
	// DevMode, for local use only, enables POST /api/v1/dev/token
	// {"userId"} on the gateway, which mints a JWT, and a fixed, public
	// secret (logged as a warning).
	DevMode bool `env:"AUTH_DEV_MODE" envDefault:"false"`
	// CacheSize is how many verified tokens are remembered until their
	// exp, so a token polled every few seconds is checked by signature
	// once. The oldest added is evicted first; each takes about 225 bytes
	// (30 MB when full); a hit takes only a read lock. Size it above the
	// users one replica sees polling. A forged or altered token never
	// hits: the key is the whole token, and only tokens that passed every
	// check are stored. 0 turns the cache off.
	CacheSize int `env:"AUTH_CACHE_SIZE" envDefault:"131072"`
}

// Log configures the process logger and the diagnostics next to it.
type Log struct {
	// Level is the least severe level logged: debug, info, warn or error.
	Level string `env:"LOG_LEVEL" envDefault:"info"`
	// PprofAddr, when set, serves net/http/pprof's /debug/pprof/ on a
	// listener of its own at this address as well, apart from the API and
	// ops listeners so it is never exposed with the API: the pod's
	// loopback 127.0.0.1:6060 and kubectl port-forward, for example.
	// Unset, there is no such listener.
	PprofAddr string `env:"PPROF_ADDR"`
	// PprofEnabled serves net/http/pprof's /debug/pprof/ on the ops
	// listener (OPS_ADDR), next to /metrics, never on the API port. Off by
	// default: a CPU profile costs CPU while it runs, so only those who may
	// load the service should reach it.
	PprofEnabled bool `env:"PPROF_ENABLED" envDefault:"false"`
}

// LogLevel is the configured LOG_LEVEL.
func (l Log) LogLevel() string { return l.Level }

// PprofAddress is the configured PPROF_ADDR; empty means off.
func (l Log) PprofAddress() string { return l.PprofAddr }

// HTTP bounds how long one client may hold a connection to any of a
// service's listeners, so that a client sending slowly, or not at all,
// cannot pin connections (and the goroutines and buffers behind them).
type HTTP struct {
	// ReadTimeout bounds reading one request on any listener, headers and
	// body together, from its first byte; the headers alone get min(5s,
	// HTTP_READ_TIMEOUT). A body still arriving then ends the request, and
	// the connection is closed: a client still sending is cut off.
	ReadTimeout time.Duration `env:"HTTP_READ_TIMEOUT" envDefault:"10s"`
	// WriteTimeout bounds a response on any listener, from the end of the
	// request's headers to its last byte: the handler's work and the
	// write. It must be at least HTTP_READ_TIMEOUT. Event streams are taken
	// over from net/http and not cut by it: a write that waits for a
	// stream's socket has its own deadline (SSE_WRITE_TIMEOUT) instead. The
	// ops listener has none while PPROF_ENABLED (a profile streams for its
	// ?seconds=).
	WriteTimeout time.Duration `env:"HTTP_WRITE_TIMEOUT" envDefault:"30s"`
	// IdleTimeout closes a keep-alive connection, on any listener, that
	// sends no next request for this long.
	IdleTimeout time.Duration `env:"HTTP_IDLE_TIMEOUT" envDefault:"120s"`
	// ShutdownTimeout bounds the graceful shutdown: in-flight requests
	// finish within it. Keep it below the pod's
	// terminationGracePeriodSeconds (the manifests set 10s for the
	// notification-service and the dispatcher).
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
}

// Proxies is what a service facing clients believes of the ingress.
type Proxies struct {
	// TrustedProxies are the CIDRs (or IPs), comma-separated, whose
	// X-Forwarded-For is believed: the ingress. From anyone else the TCP
	// peer is the client.
	TrustedProxies []string `env:"TRUSTED_PROXIES"`
}

// Check reports TRUSTED_PROXIES entries that are neither a CIDR nor an IP.
func (p Proxies) Check() error {
	var errs []error
	for _, e := range p.TrustedProxies {
		if _, _, err := net.ParseCIDR(e); err != nil && net.ParseIP(e) == nil {
			errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %q is neither a CIDR nor an IP", e))
		}
	}
	return errors.Join(errs...)
}

// CORS is which browser origins (the gateway's page) may call a service
// that is not the page's own origin.
type CORS struct {
	// CORSAllowedOrigins are the browser origins, comma-separated, each
	// scheme://host[:port], that may call the service: the gateway's page.
	CORSAllowedOrigins []string `env:"CORS_ALLOWED_ORIGINS" envDefault:"http://localhost:8080,http://127.0.0.1:8080"`
}

// Origins trims the list ("a, b" is a common way to write it) and refuses
// an entry that is not scheme://host[:port].
func (c CORS) Origins() ([]string, error) {
	out := make([]string, 0, len(c.CORSAllowedOrigins))
	for _, o := range c.CORSAllowedOrigins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("CORS_ALLOWED_ORIGINS: %q is not an origin (scheme://host[:port])", o)
		}
		out = append(out, strings.TrimSuffix(o, "/"))
	}
	return out, nil
}

// Check reports an entry of CORS_ALLOWED_ORIGINS that is not an origin.
func (c CORS) Check() error {
	_, err := c.Origins()
	return err
}

// Check reports what is wrong with the timeouts: each must be positive
// (zero would mean no limit at all), and a response must be allowed at
// least as long as its request, since its clock starts before the body is
// read.
func (h HTTP) Check() error {
	var errs []error
	if h.ShutdownTimeout <= 0 {
		errs = append(errs, errors.New("SHUTDOWN_TIMEOUT must be positive"))
	}
	if h.ReadTimeout <= 0 || h.WriteTimeout <= 0 || h.IdleTimeout <= 0 {
		errs = append(errs, errors.New("HTTP_READ_TIMEOUT, HTTP_WRITE_TIMEOUT and HTTP_IDLE_TIMEOUT must be positive"))
	} else if h.WriteTimeout < h.ReadTimeout {
		errs = append(errs, fmt.Errorf("HTTP_WRITE_TIMEOUT (%s) must be at least HTTP_READ_TIMEOUT (%s): it also covers reading the body", h.WriteTimeout, h.ReadTimeout))
	}
	return errors.Join(errs...)
}

// Load fills cfg (a pointer to a struct) from the environment and runs its
// Validate method when it has one.
func Load(cfg any) error {
	if err := env.Parse(cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	return nil
}

// LoadFrom is Load with an explicit environment, for tests.
func LoadFrom(cfg any, environ map[string]string) error {
	if err := env.ParseWithOptions(cfg, env.Options{Environment: environ}); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if v, ok := cfg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	return nil
}

// Tickets are the keys of the queue tickets the gateway hands out and the
// gateway and notification-service check (see pkg/ticket).
type Tickets struct {
	// Keys is a comma-separated list of queue-ticket keys of at least 32
	// bytes each (a shorter one is refused at start): the first signs,
	// every one verifies, so a key rotates without downtime (add the new
	// one second, then first, then drop the old). Every gateway and
	// notification-service replica must have the same list. Empty: a key
	// derived from AUTH_JWT_SECRET (from the dev secret in dev mode);
	// required, outside dev mode, when AUTH_JWT_SECRET is not set (tokens
	// come from AUTH_JWKS_URL alone). See docs/DESIGN.md "Tickets and the
	// admission frontier".
	Keys []string `env:"TICKET_KEYS" envSeparator:"," json:"-"`
}

// EntryTokens are the keys the admission-dispatcher signs entry tokens
// with and the order-service checks them with while Redis is down (see
// pkg/grant): a queue that fails OPEN lets holders of a signed token order
// then, and nobody else.
type EntryTokens struct {
	// Keys is a comma-separated list of entry-token keys (pkg/grant) of at
	// least 32 bytes each: the first signs, every one verifies (rotate as
	// TICKET_KEYS). Every dispatcher, gateway and order-service replica
	// must have the same list. Empty: tokens are unsigned, and a queue that
	// fails OPEN lets nobody order while Redis is down (it answers as one
	// that fails CLOSED).
	Keys []string `env:"ENTRY_TOKEN_KEYS" envSeparator:"," json:"-"`
}
