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

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/waitingroom/waitingroom/pkg/telemetry"
)

// Options tune the adapter. Zero values take the defaults.
type Options struct {
	// MaxOpenConns bounds the connection pool (default 40). Orders on one
	// product serialize on its row lock anyway; more connections only
	// queue there.
	MaxOpenConns int
	// Log receives migration and slow-statement logs (default
	// slog.Default()).
	Log *slog.Logger
	// Statements measures every SQL statement's duration (nil: not
	// measured); a statement is logged at debug level from 200 ms, and as
	// a warning only from SlowWarn (default 2s): a database slow enough to
	// see in the metric is not yet worth a warning.
	Statements func(time.Duration)
	SlowWarn   time.Duration
	// GroupCommit is the most orders of one product that share a
	// transaction (default 64; 1: every order has its own). See group.go.
	GroupCommit int
	// Batched is told each shared transaction's orders and how long its
	// first order waited for it (nil: not told).
	Batched func(orders int, waited time.Duration)
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
	if o.SlowWarn <= 0 {
		o.SlowWarn = 2 * time.Second
	}
	if o.GroupCommit <= 0 {
		o.GroupCommit = 64
	}
	return o
}

// DB is the order database. It is safe for concurrent use.
type DB struct {
	gdb   *gorm.DB
	sql   *sql.DB
	opts  Options
	group *committer // nil: every order alone
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
	if telemetry.Enabled() {
		// A span a statement, at the driver, without the values bound to
		// it (user ids, idempotency keys: otelpgx leaves them out unless
		// asked). gorm's own tracing plugin would link the ClickHouse and
		// MySQL drivers into the build.
		cfg.Tracer = otelpgx.NewTracer(otelpgx.WithDisableConnectionDetailsInAttributes())
	}

	sqlDB := stdlib.OpenDB(*cfg)
	sqlDB.SetMaxOpenConns(o.MaxOpenConns)
	// database/sql keeps only 2 idle connections by default: under load
	// every other transaction would pay for a new backend.
	sqlDB.SetMaxIdleConns(o.MaxOpenConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	sqlDB.SetConnMaxLifetime(30 * time.Minute) // follow failovers and DNS changes

	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		SkipDefaultTransaction: true, // single statements need no BEGIN/COMMIT around them
		DisableAutomaticPing:   true, // we ping with the caller's context below
		NowFunc:                func() time.Time { return time.Now().UTC() },
		Logger:                 statementLog{log: o.Log, observe: o.Statements, warn: o.SlowWarn},
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("pg: open: %w", err)
	}
	d := &DB{gdb: gdb, sql: sqlDB, opts: o}
	if o.GroupCommit > 1 {
		d.group = newCommitter(d, o.GroupCommit)
	}
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

// statementLog is gorm's logger: every statement's duration (from the
// call, so a wait for a pooled connection counts) goes to the metric, a slow one (from slowDebug) to a debug line and a very slow one
// (from warn) to a warning, with the statement's text and never its
// parameters (user ids, payloads). Errors are not logged here: each is
// returned to the caller, who decides whether it is worth logging (a
// duplicate token is not).
type statementLog struct {
	log     *slog.Logger
	observe func(time.Duration)
	warn    time.Duration
}

// slowDebug is where a statement starts to be logged at debug level.
const slowDebug = 200 * time.Millisecond

func (l statementLog) LogMode(logger.LogLevel) logger.Interface { return l }

func (l statementLog) Info(ctx context.Context, msg string, args ...any) {
	l.log.InfoContext(ctx, fmt.Sprintf(msg, args...))
}

func (l statementLog) Warn(ctx context.Context, msg string, args ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(msg, args...))
}

func (l statementLog) Error(ctx context.Context, msg string, args ...any) {
	l.log.ErrorContext(ctx, fmt.Sprintf(msg, args...))
}

func (l statementLog) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), _ error) {
	took := time.Since(begin)
	if l.observe != nil {
		l.observe(took)
	}
	level := slog.LevelDebug
	switch {
	case took >= l.warn:
		level = slog.LevelWarn
	case took < slowDebug || !l.log.Enabled(ctx, slog.LevelDebug):
		return
	}
	sql, rows := fc()
	l.log.Log(ctx, level, "slow SQL statement", "duration", took.Round(time.Millisecond).String(), "sql", sql, "rows", rows)
}

// ParamsFilter keeps statement parameters out of the log: gorm then
// writes the statement with its placeholders.
func (l statementLog) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}
