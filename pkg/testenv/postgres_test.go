package testenv

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"
)

func countDatabases(t *testing.T, server, name string) int {
	t.Helper()
	db, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatalf("count databases: %v", err)
	}
	return n
}

func TestPostgresURLCreatesAndDropsADatabase(t *testing.T) {
	t.Parallel()
	server := PostgresServerURL(t)
	var name string
	t.Run("use", func(t *testing.T) {
		u := PostgresURL(t)
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimPrefix(parsed.Path, "/")
		if !strings.Contains(name, "-") {
			t.Fatalf("database name %q: want the test id, dashes included", name)
		}
		db, err := sql.Open("pgx", u)
		if err != nil {
			t.Fatal(err)
		}
		// Left open on purpose: the cleanup must drop the database anyway.
		var current string
		if err := db.QueryRow("SELECT current_database()").Scan(&current); err != nil {
			t.Fatalf("connect to the test database: %v", err)
		}
		if current != name {
			t.Fatalf("current_database() = %q, want %q", current, name)
		}
		if _, err := db.Exec("CREATE TABLE t (id int)"); err != nil {
			t.Fatalf("create table: %v", err)
		}
	})
	if n := countDatabases(t, server, name); n != 0 {
		t.Fatalf("%d databases named %q after the test ended, want 0", n, name)
	}
}

func TestPostgresURLViaProxy(t *testing.T) {
	t.Parallel()
	u := PostgresURL(t)
	p := StartProxy(t, PostgresAddr(t, u))
	via := PostgresURLVia(t, u, p.Addr())
	if want := strings.Replace(u, PostgresAddr(t, u), p.Addr(), 1); via != want {
		t.Fatalf("PostgresURLVia = %q, want %q", via, want)
	}
	db, err := sql.Open("pgx", via)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping through the proxy: %v", err)
	}
	p.Cut()
	db.SetMaxIdleConns(0) // a fresh connection, which the cut line refuses
	if err := db.PingContext(ctx); err == nil {
		t.Fatal("ping through a cut proxy succeeded")
	}
}
