// Package pg is the order-service's PostgreSQL adapter: products and their
// stock, orders, the transactional outbox of order events and stored
// Idempotency-Key results, on gorm over pgx. Open migrates the schema
// (embedded goose migrations) before it returns.
//
// Every error wraps a sentinel of package order where one applies; a database
// that does not answer (connection refused or reset, timeout, too many
// connections, shutdown) wraps order.ErrUnavailable, which is restorable.
// context.Canceled from the caller passes through.
package pg

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/opentelemetry/tracing"

	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// Options tune the adapter. Zero values take the defaults.
type Options struct {
	// MaxOpenConns bounds the connection pool (default 40). Orders on one
	// product serialize on its row lock anyway; more connections only
	// queue there.
	MaxOpenConns int
	// Log receives migration and slow-query logs (default slog.Default()).
	Log *slog.Logger
	// TxTimeout bounds every call, the order transaction included (default
	// 5s): the order transaction never outlives the token's inflight lease,
	// so a stuck database turns into a restorable failure in time.
	TxTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 40
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.TxTimeout <= 0 {
		o.TxTimeout = 5 * time.Second
	}
	return o
}

// DB is the order database. It is safe for concurrent use.
type DB struct {
	gdb  *gorm.DB
	sql  *sql.DB
	opts Options
}

// Open connects to dsn (a postgres:// URL or key=value string), checks the
// server answers and applies pending migrations. Several replicas may Open
// the same database at once: migrations run under a session advisory lock.
func Open(ctx context.Context, dsn string, o Options) (*DB, error) {
	o = o.withDefaults()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pg: parse database URL: %w", err) // pgx redacts the password
	}
	setDefault(cfg.RuntimeParams, "application_name", "order-service")
	// A client that vanishes mid-transaction (network black hole) would
	// hold the product's row lock until TCP gives up; the server ends such
	// a session itself well after any healthy transaction has finished.
	setDefault(cfg.RuntimeParams, "idle_in_transaction_session_timeout",
		strconv.FormatInt((2*o.TxTimeout).Milliseconds(), 10))
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = o.TxTimeout
	}

	sqlDB := stdlib.OpenDB(*cfg)
	sqlDB.SetMaxOpenConns(o.MaxOpenConns)
	// database/sql keeps only 2 idle connections by default: under load
	// every other transaction would pay for a new backend.
	sqlDB.SetMaxIdleConns(o.MaxOpenConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	sqlDB.SetConnMaxLifetime(30 * time.Minute) // follow failovers and DNS changes

	slow := logger.NewSlogLogger(o.Log, logger.Config{
		SlowThreshold:        200 * time.Millisecond,
		LogLevel:             logger.Warn,
		ParameterizedQueries: true, // no user ids or payloads in logs
	})
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		SkipDefaultTransaction: true, // single statements need no BEGIN/COMMIT around them
		DisableAutomaticPing:   true, // we ping with the caller's context below
		NowFunc:                func() time.Time { return time.Now().UTC() },
		Logger:                 quietErrors{slow},
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("pg: open: %w", err)
	}
	if telemetry.Enabled() {
		// A span a statement, without the values bound to it (user ids,
		// idempotency keys) and without the plugin's own metrics.
		if err := gdb.Use(tracing.NewPlugin(tracing.WithoutMetrics(), tracing.WithoutQueryVariables())); err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("pg: tracing: %w", err)
		}
	}
	d := &DB{gdb: gdb, sql: sqlDB, opts: o}
	if err := d.Ping(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	if err := migrate(ctx, sqlDB, o.Log); err != nil {
		_ = sqlDB.Close()
		return nil, wrap(ctx, "migrate", err)
	}
	return d, nil
}

// Close closes the connection pool; in-flight calls finish first.
func (d *DB) Close() error { return d.sql.Close() }

// Ping checks the database answers (readiness).
func (d *DB) Ping(ctx context.Context) error {
	tctx, cancel := d.timeout(ctx)
	defer cancel()
	return wrap(ctx, "ping", d.sql.PingContext(tctx))
}

// timeout bounds one call by TxTimeout (or the caller's earlier deadline).
func (d *DB) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.opts.TxTimeout)
}

// conn is the gorm handle for one call.
func (d *DB) conn(ctx context.Context) *gorm.DB { return d.gdb.WithContext(ctx) }

func setDefault(m map[string]string, k, v string) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// quietErrors keeps gorm's slow-query log but not its error log: every
// error is returned to the caller, who decides whether it is worth logging
// (a duplicate token is not).
type quietErrors struct{ logger.Interface }

func (q quietErrors) LogMode(l logger.LogLevel) logger.Interface {
	return quietErrors{q.Interface.LogMode(l)}
}

func (q quietErrors) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), _ error) {
	q.Interface.Trace(ctx, begin, fc, nil)
}

// ParamsFilter keeps query parameters (user ids, payloads) out of the slow
// query log; the embedded interface does not carry this optional method.
func (q quietErrors) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := q.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, params
}
