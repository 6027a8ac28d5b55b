package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

const startPostgres = `pg_ctlcluster --skip-systemctl-redirect 15 main start`

var postgresContainer = container{server: "postgres"}

// PostgresServerURL returns the URL of a PostgreSQL server that answers, or
// fails the test: DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable, else a
// container when a Docker engine answers. The database it names is the one
// to connect to for administration; tests want their own: see PostgresURL.
func PostgresServerURL(t testing.TB) string {
	t.Helper()
	u := getenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	err := pingPostgres(u)
	if err == nil {
		return u
	}
	addr, derr := postgresContainer.start()
	if derr == nil {
		return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
	}
	t.Fatalf("PostgreSQL is not reachable at DATABASE_URL=%s: %v\n"+
		"Start one with:  %s\n"+
		"or point DATABASE_URL at one (with a Docker engine the tests start a container; here: %v)",
		redact(u), err, startPostgres, derr)
	return ""
}

// PostgresURL creates a database of its own for this test on the server of
// PostgresServerURL and returns its URL. The database is dropped when the test
// ends, connections still open to it included.
func PostgresURL(t testing.TB) string {
	t.Helper()
	server := PostgresServerURL(t)
	name := ID(t)
	ident := quoteIdent(name)
	if err := adminExec(server, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("create database %s: %v", ident, err)
	}
	t.Cleanup(func() {
		// FORCE (PG 13+) terminates the connections a test left open.
		if err := adminExec(server, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", ident, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("DATABASE_URL %s: %v", redact(server), err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// PostgresURLVia returns dbURL with its host:port replaced by hostport, the
// rest (user, database, parameters) unchanged: aim a client at a
// testenv.Proxy that forwards to the server.
func PostgresURLVia(t testing.TB, dbURL, hostport string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("postgres URL %s: %v", redact(dbURL), err)
	}
	u.Host = hostport
	return u.String()
}

// PostgresAddr returns the host:port a Postgres URL points at, the target
// for testenv.StartProxy.
func PostgresAddr(t testing.TB, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("postgres URL %s: %v", redact(dbURL), err)
	}
	if u.Port() == "" {
		return u.Hostname() + ":5432"
	}
	return u.Host
}

// quoteIdent quotes a SQL identifier: test ids contain '-'.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func adminExec(serverURL, stmt string) error {
	db, err := sql.Open("pgx", serverURL)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

func pingPostgres(u string) error {
	db, err := sql.Open("pgx", u)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// redact hides a password in a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
