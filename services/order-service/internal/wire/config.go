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
	// HTTPAddr is the API listener's address, the port the ingress routes
	// to. (The dispatcher serves no API and does not read it.)
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8081"`
	// OpsAddr is the ops listener: /metrics, /healthz, /readyz (a 503 says
	// which checks failed and why) and, when PPROF_ENABLED, /debug/pprof/,
	// for Prometheus, probes and operators. Keep it off the public network.
	// Always on; tests use 127.0.0.1:0 and read the bound address.
	OpsAddr string `env:"OPS_ADDR" envDefault:":9081"`
	config.HTTP
	config.Log
	config.Redis
	config.AMQP
	config.Database
	config.Auth
	config.Proxies
	config.CORS
	// OrderRateLimitPerQueue is, per queue, order requests per second whose
	// entry token passed the cheap, read-only check, before 429; junk never
	// counts here. 0 turns it off.
	OrderRateLimitPerQueue int `env:"ORDER_RATE_LIMIT_PER_QUEUE" envDefault:"500"`
	// OrderRateLimitPerUser is, per user, order requests per second whose
	// entry token failed the cheap check (junk, spent, not yet active)
	// before 429, answered from Redis alone, never Postgres. Requests with
	// a usable token never count. 0 turns it off.
	OrderRateLimitPerUser int `env:"ORDER_RATE_LIMIT_PER_USER" envDefault:"5"`
	// OrderLocalRatePerUser is, per user, order requests per second (burst
	// the same), counted in this replica's memory (pkg/throttle) before the
	// entry token is checked: beyond it 429 rate-limited with Retry-After,
	// with no Redis or Postgres call, so a flood from one login never
	// reaches Redis beyond it. 0 turns it off.
	OrderLocalRatePerUser int `env:"ORDER_LOCAL_RATE_PER_USER" envDefault:"10"`
	// OrderLocalInFlightPerUser is, per user, order requests in flight at
	// once in this replica, checked with ORDER_LOCAL_RATE_PER_USER (429 with
	// Retry-After 1 s beyond): a flood over many connections from one login
	// holds at most this many of the Redis pool. 0 turns it off.
	OrderLocalInFlightPerUser int `env:"ORDER_LOCAL_INFLIGHT_PER_USER" envDefault:"4"`
	// OrderLookupRatePerUser is, per user, GET /api/v1/orders/{id} per
	// second (burst the same), counted in this replica's memory before
	// Postgres. 0 turns it off.
	OrderLookupRatePerUser int `env:"ORDER_LOOKUP_RATE_PER_USER" envDefault:"5"`
	// OrderLookupMaxInFlight caps this replica's order lookups in flight,
	// whoever sends them (429 beyond), so lookups never hold more than this
	// many of DB_MAX_CONNS: keep it below that. 0 turns it off.
	OrderLookupMaxInFlight int `env:"ORDER_LOOKUP_MAX_INFLIGHT" envDefault:"8"`
	// LocalLimits: PUBLIC_RATE_LIMIT_PER_IP limits the order-service's
	// public route, GET /api/v1/products.
	config.LocalLimits
	// ClientIPv6Prefix is the prefix length, 32 to 128, an IPv6 client is
	// counted by in per-address limits and caps: one subscriber holds at
	// least a /64 and may pick a fresh address of it for every request;
	// 128 counts every address alone. An IPv4-mapped address counts as the
	// IPv4 address. Keys look like 203.0.113.7 and 2001:db8:1:2::/64
	// (clientkey.Of).
	ClientIPv6Prefix int `env:"CLIENT_IPV6_PREFIX" envDefault:"64"`
	// OrderLease is how long a consumed token may stay unsettled before the
	// reaper settles or restores it; at least three ORDER_TX_TIMEOUTs, so
	// the reaper never races a live order.
	OrderLease time.Duration `env:"ORDER_LEASE" envDefault:"30s"`
	// TxTimeout bounds the order transaction: at most a third of
	// ORDER_LEASE.
	TxTimeout time.Duration `env:"ORDER_TX_TIMEOUT" envDefault:"5s"`
	// OrderGroupCommit (1 to 1000) is the most orders of one product that share one
	// transaction and commit (group commit): the orders that arrive while
	// the product's transaction runs are placed together by the next one,
	// in arrival order, each with its own outcome. A lone order never waits
	// for company. 1 gives every order its own transaction.
	OrderGroupCommit int `env:"ORDER_GROUP_COMMIT" envDefault:"64"`
	// DBMaxConns is the size of the PostgreSQL connection pool.
	DBMaxConns int `env:"DB_MAX_CONNS" envDefault:"40"`
	// DBSlowStatementWarn is how long one SQL statement may take before it
	// is logged as a warning. Every statement's duration is in the metric
	// waitingroom_orders_sql_statement_duration_seconds, and one from
	// 200 ms is logged at debug level (LOG_LEVEL=debug).
	DBSlowStatementWarn time.Duration `env:"DB_SLOW_STATEMENT_WARN" envDefault:"2s"`
	// ReapInterval is the reaper's period.
	ReapInterval time.Duration `env:"REAPER_INTERVAL" envDefault:"1s"`
	// MaxQuantity is the largest quantity one order may ask for.
	MaxQuantity int `env:"ORDER_MAX_QUANTITY" envDefault:"10"`
	// StartupTimeout is how long start-up keeps retrying a PostgreSQL that
	// is not up yet before it fails (the Kubernetes startup probe allows
	// 90 s).
	StartupTimeout time.Duration `env:"STARTUP_TIMEOUT" envDefault:"60s"`
	// OrderFailed: the order-service declares the dispatcher's OrderFailed
	// queue too, so a failure published before the dispatcher's first
	// start waits for it.
	config.OrderFailed
	// OutboxRetention keeps published order events in the outbox table
	// this long, for inspection. 0 keeps them forever; otherwise it must be
	// at least 1h and ten ORDER_LEASEs (an outbox row's event id keeps a
	// failure from being recorded twice while the reaper may still act on
	// its token).
	OutboxRetention time.Duration `env:"OUTBOX_RETENTION" envDefault:"72h"`
	// IdempotencyKeyRetention keeps Idempotency-Key outcomes this long: a
	// retry after that is a new request. 0 keeps them forever; otherwise it
	// must be at least 1h and ten ORDER_LEASEs (a key must outlive its
	// client's retries).
	IdempotencyKeyRetention time.Duration `env:"IDEMPOTENCY_KEY_RETENTION" envDefault:"24h"`
	// RetentionInterval is the pause between the passes that delete what
	// OUTBOX_RETENTION and IDEMPOTENCY_KEY_RETENTION let go.
	RetentionInterval time.Duration `env:"RETENTION_INTERVAL" envDefault:"5m"`
	// HealthInterval is how often each replica publishes its per-queue
	// order health (order.health: orders, p95, unavailable) for the
	// dispatcher's adaptive admission. 0 turns the reports off; otherwise
	// from 100ms to 2s, well inside the 5 s after which the dispatcher
	// takes a queue without a report as stale.
	HealthInterval time.Duration `env:"ORDER_HEALTH_INTERVAL" envDefault:"1s"`
	// EntryTokens: while Redis is down, the order-service checks with
	// ENTRY_TOKEN_KEYS the signed entry tokens and the gateway's passes a
	// queue that fails OPEN takes.
	config.EntryTokens
	// FailOpenMaxOrdersPerUser bounds one person's orders in a queue that
	// sets no maxOrdersPerUser while Redis is down and the queue fails
	// OPEN; 0: no bound beyond the queue's.
	FailOpenMaxOrdersPerUser int64 `env:"FAIL_OPEN_MAX_ORDERS_PER_USER" envDefault:"1"`
	// QueueChangesQueue is the quorum queue the replicas share to store
	// the queues' records: the operators' changes (QueueChanged,
	// queue.changed) in the audit trail, GET /admin/v1/audit, and the
	// lines' minutes (QueueMinute, queue.minute) in the history the sale
	// report is made of. Deployments on one RabbitMQ vhost with different
	// exchanges need different names.
	QueueChangesQueue string `env:"QUEUE_CHANGES_QUEUE" envDefault:"order-service.queue-changes"`
	// HistoryRetention keeps each queue's minutes (GET
	// /admin/v1/queues/{queueId}/report) this long; 0 keeps them forever,
	// otherwise at least 24h.
	HistoryRetention time.Duration `env:"HISTORY_RETENTION" envDefault:"720h"`
	// HistoryRollUpInterval is how often a replica counts the orders of the
	// last minutes per queue and minute for the history (every replica
	// does, with the same result): a report's orders are this far behind
	// at most. From 1s to 5m.
	HistoryRollUpInterval time.Duration `env:"HISTORY_ROLLUP_INTERVAL" envDefault:"30s"`
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
// maxGroupCommit bounds a shared transaction: its statements bind ten
// values an order, far below PostgreSQL's 65,535.
const maxGroupCommit = 1000

func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, auth.CheckConfig(c.Auth), c.Proxies.Check(), c.CORS.Check(), c.HTTP.Check())
	if c.QueueChangesQueue == "" || len(c.QueueChangesQueue) > 200 {
		errs = append(errs, errors.New("QUEUE_CHANGES_QUEUE: a queue name of 1 to 200 bytes"))
	}
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
	if c.HistoryRetention != 0 && c.HistoryRetention < 24*time.Hour {
		errs = append(errs, fmt.Errorf("HISTORY_RETENTION must be 0 (keep forever) or at least 24h, got %s", c.HistoryRetention))
	}
	if c.HistoryRollUpInterval < time.Second || c.HistoryRollUpInterval > 5*time.Minute {
		errs = append(errs, fmt.Errorf("HISTORY_ROLLUP_INTERVAL must be between 1s and 5m, got %s", c.HistoryRollUpInterval))
	}
	if c.OrderGroupCommit < 1 || c.OrderGroupCommit > maxGroupCommit {
		errs = append(errs, fmt.Errorf("ORDER_GROUP_COMMIT must be between 1 (every order alone) and %d, got %d", maxGroupCommit, c.OrderGroupCommit))
	}
	if c.RetentionInterval <= 0 {
		errs = append(errs, errors.New("RETENTION_INTERVAL must be positive"))
	}
	if c.DBMaxConns < 1 || c.ReapInterval <= 0 || c.MaxQuantity < 1 || c.StartupTimeout <= 0 || c.DBSlowStatementWarn <= 0 {
		errs = append(errs, errors.New("DB_MAX_CONNS, REAPER_INTERVAL, ORDER_MAX_QUANTITY, STARTUP_TIMEOUT and DB_SLOW_STATEMENT_WARN must be positive"))
	}
	return errors.Join(errs...)
}
