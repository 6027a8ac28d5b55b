package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

func TestWrapClassifiesErrors(t *testing.T) {
	t.Parallel()
	pgErr := func(code string) error { return fmt.Errorf("exec: %w", &pgconn.PgError{Code: code}) }
	cases := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"too many connections", pgErr("53300"), true},
		{"admin shutdown", pgErr("57P01"), true},
		{"cannot connect now", pgErr("57P03"), true},
		{"connection failure", pgErr("08006"), true},
		{"statement timeout", pgErr("57014"), true},
		{"deadlock", pgErr("40P01"), true},
		{"unique violation", pgErr("23505"), false},
		{"check violation", pgErr("23514"), false},
		{"bad password", pgErr("28P01"), false},
		{"syntax error", pgErr("42601"), false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"unexpected EOF", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", pgconn.ErrConnClosed, true},
		{"deadline", fmt.Errorf("timeout: %w", context.DeadlineExceeded), true},
		{"rolled back at the deadline", fmt.Errorf("commit: %w", sql.ErrTxDone), true},
		{"other", errors.New("something else"), false},
	}
	for _, c := range cases {
		err := wrap(context.Background(), "op", c.err)
		if got := errors.Is(err, order.ErrUnavailable); got != c.unavailable {
			t.Errorf("%s: wrap(%v) unavailable = %v, want %v", c.name, c.err, got, c.unavailable)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%s: wrap lost the cause: %v", c.name, err)
		}
	}

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, cause := range []error{context.Canceled, io.ErrUnexpectedEOF} {
		err := wrap(canceled, "op", cause)
		if !errors.Is(err, context.Canceled) || errors.Is(err, order.ErrUnavailable) {
			t.Errorf("caller canceled, driver said %v: got %v, want context.Canceled only", cause, err)
		}
	}
	if err := wrap(context.Background(), "op", fmt.Errorf("x: %w", order.ErrSoldOut)); !errors.Is(err, order.ErrSoldOut) ||
		errors.Is(err, order.ErrUnavailable) {
		t.Errorf("sold out wrapped as %v", err)
	}
	if wrap(context.Background(), "op", nil) != nil {
		t.Error("wrap(nil) != nil")
	}
}

// A failed transaction is known to have stored nothing when the server
// answered with an error, nothing was sent, or database/sql rolled it back
// before its COMMIT; a timeout or a lost connection may hide a commit.
func TestNothingStoredOnlyWhenKnown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"server error", fmt.Errorf("exec: %w", &pgconn.PgError{Code: "40001"}), true},
		{"no connection", &pgconn.ConnectError{}, true},
		{"rolled back at the deadline", fmt.Errorf("commit: %w", sql.ErrTxDone), true},
		{"deadline", fmt.Errorf("commit: %w", context.DeadlineExceeded), false},
		{"connection lost", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), false},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), false},
	} {
		if got := nothingStored(c.err); got != c.want {
			t.Errorf("%s: nothingStored(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
