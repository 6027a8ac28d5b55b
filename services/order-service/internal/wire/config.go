// Package wire builds the order-service from its configuration.
package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/clientkey"
	"github.com/waitingroom/waitingroom/pkg/config"
	"github.com/waitingroom/waitingroom/pkg/grant"
)

// Config is the order-service's environment.
type Config struct {
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8081"`
	// OpsAddr is the ops listener (/metrics, /healthz, /readyz, pprof when
	// PPROF_ENABLED): for Prometheus, probes and operators, never routed
	// to the world.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9081"`
	config.HTTP
	config.Log
	config.Redis
	config.AMQP
	config.Database
	config.Auth
	config.Proxies
	config.CORS
	// OrderRateLimitPerQueue is orders per second per queue before 429; 0 = off.
	OrderRateLimitPerQueue int `env:"ORDER_RATE_LIMIT_PER_QUEUE" envDefault:"500"`
	// OrderRateLimitPerUser is, per user, order requests per second whose
	// entry token failed the cheap check (junk, spent, not yet active)
	// before 429; 0 = off. Requests with a usable token never count.
	OrderRateLimitPerUser int `env:"ORDER_RATE_LIMIT_PER_USER" envDefault:"5"`
	// OrderLocalRatePerUser and OrderLocalInFlightPerUser limit each
	// user's order requests in this replica's memory, before the entry
	// token is checked: a flood from one login never reaches Redis beyond
	// them. 0 turns either off.
	OrderLocalRatePerUser     int `env:"ORDER_LOCAL_RATE_PER_USER" envDefault:"10"`
	OrderLocalInFlightPerUser int `env:"ORDER_LOCAL_INFLIGHT_PER_USER" envDefault:"4"`
	// OrderLookupRatePerUser limits each user's GET /api/v1/orders/{id} per
	// second in this replica's memory, before Postgres; OrderLookupMaxInFlight
	// caps the replica's lookups in flight, whoever sends them, so lookups
	// never hold more than that many of DB_MAX_CONNS. 0 turns either off.
	OrderLookupRatePerUser int `env:"ORDER_LOOKUP_RATE_PER_USER" envDefault:"5"`
	OrderLookupMaxInFlight int `env:"ORDER_LOOKUP_MAX_INFLIGHT" envDefault:"8"`
	// LocalLimits: PUBLIC_RATE_LIMIT_PER_IP (GET /api/v1/products) and
	// LOCAL_LIMIT_KEYS.
	config.LocalLimits
	// ClientIPv6Prefix is the prefix length an IPv6 client is limited by.
	ClientIPv6Prefix int `env:"CLIENT_IPV6_PREFIX" envDefault:"64"`
	// OrderLease is how long a consumed token may stay unsettled before the
	// reaper settles or restores it.
	OrderLease time.Duration `env:"ORDER_LEASE" envDefault:"30s"`
	// TxTimeout bounds the order transaction; far below OrderLease.
	TxTimeout  time.Duration `env:"ORDER_TX_TIMEOUT" envDefault:"5s"`
	DBMaxConns int           `env:"DB_MAX_CONNS" envDefault:"40"`
	// DBSlowStatementWarn is how long one SQL statement may take before it
	// is logged as a warning. Every statement's duration is in the metric
	// waitingroom_orders_sql_statement_duration_seconds, and one from
	// 200 ms is logged at debug level (LOG_LEVEL=debug).
	DBSlowStatementWarn time.Duration `env:"DB_SLOW_STATEMENT_WARN" envDefault:"2s"`
	ReapInterval        time.Duration `env:"REAPER_INTERVAL" envDefault:"1s"`
	MaxQuantity         int           `env:"ORDER_MAX_QUANTITY" envDefault:"10"`
	StartupTimeout      time.Duration `env:"STARTUP_TIMEOUT" envDefault:"60s"`
	// OrderFailed names the dispatcher's OrderFailed queue, which the
	// order-service declares too.
	config.OrderFailed
	// OutboxRetention keeps published order events in the outbox table
	// this long (for inspection); IdempotencyKeyRetention keeps
	// Idempotency-Key outcomes this long (a retry after that is a new
	// request). 0 keeps rows forever. RetentionInterval is the pause between
	// deletion passes.
	OutboxRetention         time.Duration `env:"OUTBOX_RETENTION" envDefault:"72h"`
	IdempotencyKeyRetention time.Duration `env:"IDEMPOTENCY_KEY_RETENTION" envDefault:"24h"`
	RetentionInterval       time.Duration `env:"RETENTION_INTERVAL" envDefault:"5m"`
	// HealthInterval is how often the service reports each queue's order
	// path (order.health: orders, p95, unavailable) for the dispatcher's
	// adaptive admission; 0 turns the reports off.
	HealthInterval time.Duration `env:"ORDER_HEALTH_INTERVAL" envDefault:"1s"`
	// EntryTokens checks the signed entry tokens a queue that fails OPEN
	// takes while Redis is down (ENTRY_TOKEN_KEYS, the dispatcher's list).
	config.EntryTokens
	// FailOpenMaxOrdersPerUser bounds one person's orders in a queue that
	// sets no maxOrdersPerUser while Redis is down and the queue fails
	// OPEN; 0: no bound beyond the queue's.
	FailOpenMaxOrdersPerUser int64 `env:"FAIL_OPEN_MAX_ORDERS_PER_USER" envDefault:"1"`
}

// minRetention is the shortest retention allowed: an outbox row's event id
// is what keeps a failure from being recorded twice while the reaper may
// still act on its token, and a key must outlive its client's retries.
const minRetention = time.Hour

// The health reports' interval is at least minHealthInterval (one message
// per queue per interval) and at most maxHealthInterval, well inside the 5 s
// after which the dispatcher holds a queue's rate for want of news.
const (
	minHealthInterval = 100 * time.Millisecond
	maxHealthInterval = 2 * time.Second
)

// replicaID names this process in its health reports: the hostname (the
// pod's name in Kubernetes) and a random suffix, so two processes on one
// host, or a restarted pod, never share one.
func replicaID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "order-service"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// Validate checks what env tags cannot.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, auth.CheckConfig(c.Auth), c.Proxies.Check(), c.CORS.Check(), c.HTTP.Check())
	if c.FailOpenMaxOrdersPerUser < 0 {
		errs = append(errs, errors.New("FAIL_OPEN_MAX_ORDERS_PER_USER must be 0 (no bound) or positive"))
	}
	if _, err := grant.FromSettings(c.EntryTokens.Keys); err != nil {
		errs = append(errs, err)
	}
	if c.OrderRateLimitPerQueue < 0 || c.OrderRateLimitPerUser < 0 {
		errs = append(errs, errors.New("ORDER_RATE_LIMIT_PER_QUEUE and ORDER_RATE_LIMIT_PER_USER must be 0 (off) or positive"))
	}
	if c.OrderLocalRatePerUser < 0 || c.OrderLocalInFlightPerUser < 0 || c.OrderLookupRatePerUser < 0 || c.OrderLookupMaxInFlight < 0 {
		errs = append(errs, errors.New("ORDER_LOCAL_RATE_PER_USER, ORDER_LOCAL_INFLIGHT_PER_USER, ORDER_LOOKUP_RATE_PER_USER and ORDER_LOOKUP_MAX_INFLIGHT must be 0 (off) or positive"))
	}
	errs = append(errs, c.LocalLimits.Check(), clientkey.CheckIPv6Prefix(c.ClientIPv6Prefix))
	if c.TxTimeout <= 0 || c.OrderLease < 3*c.TxTimeout {
		errs = append(errs, errors.New("ORDER_LEASE must be at least three ORDER_TX_TIMEOUTs, so the reaper never races a live order"))
	}
	errs = append(errs, c.OrderFailed.Check())
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"OUTBOX_RETENTION", c.OutboxRetention}, {"IDEMPOTENCY_KEY_RETENTION", c.IdempotencyKeyRetention}} {
		if r.d != 0 && (r.d < minRetention || r.d < 10*c.OrderLease) {
			errs = append(errs, fmt.Errorf("%s must be 0 (keep forever) or at least %s and ten ORDER_LEASEs, got %s", r.name, minRetention, r.d))
		}
	}
	if c.HealthInterval != 0 && (c.HealthInterval < minHealthInterval || c.HealthInterval > maxHealthInterval) {
		errs = append(errs, fmt.Errorf("ORDER_HEALTH_INTERVAL must be 0 (off) or between %s and %s (the dispatcher takes a queue without a report for 5s as stale), got %s",
			minHealthInterval, maxHealthInterval, c.HealthInterval))
	}
	if c.RetentionInterval <= 0 {
		errs = append(errs, errors.New("RETENTION_INTERVAL must be positive"))
	}
	if c.DBMaxConns < 1 || c.ReapInterval <= 0 || c.MaxQuantity < 1 || c.StartupTimeout <= 0 || c.DBSlowStatementWarn <= 0 {
		errs = append(errs, errors.New("DB_MAX_CONNS, REAPER_INTERVAL, ORDER_MAX_QUANTITY, STARTUP_TIMEOUT and DB_SLOW_STATEMENT_WARN must be positive"))
	}
	return errors.Join(errs...)
}
