package pg

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrationsFS holds the versioned schema: add a file, never edit one that
// has shipped.
//
//go:embed migrations/*.sql
var migrationsFS embed.FS

// migrate applies pending migrations. A session-level advisory lock makes
// replicas that start together take turns: the first migrates, the others
// then find nothing pending. Advisory locks are per database, so tests on
// their own databases do not wait for each other.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	fsys, err := fs.Sub(migrationsFS, "migrations")
	if err != nil {
		return err
	}
	// Poll the lock every second (goose's minimum) for up to 5 minutes;
	// ctx cuts that short.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true), // only our embedded SQL, no Go migrations from init()s
	)
	if err != nil {
		return fmt.Errorf("goose: %w", err)
	}
	// Not p.Close: it would close our pool.
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("goose up: %w", err)
	}
	for _, r := range results {
		log.InfoContext(ctx, "database migration applied",
			"version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}
