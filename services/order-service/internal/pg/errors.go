package pg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
)

// SQLSTATE codes the adapter tells apart.
const (
	codeUniqueViolation = "23505"
	codeCheckViolation  = "23514"
)

// wrap prefixes err with the operation and, when the database did not
// answer, wraps order.ErrUnavailable too, so the HTTP edge answers 503 and
// the token is restored. ctx is the caller's: when the caller gave up, the
// error says context.Canceled whatever the driver made of it.
func wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("pg: %s: %w", op, err)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("pg: %s: %w (%w)", op, context.Canceled, err)
	case isOrderErr(err):
		return fmt.Errorf("pg: %s: %w", op, err)
	case unavailable(err):
		return fmt.Errorf("pg: %s: %w: %w", op, order.ErrUnavailable, err)
	}
	return fmt.Errorf("pg: %s: %w", op, err)
}

func isOrderErr(err error) bool {
	for _, s := range []error{order.ErrSoldOut, order.ErrProductNotFound, order.ErrOrderNotFound,
		order.ErrDuplicateToken, order.ErrUnavailable, order.ErrIdempotencyInProgress, order.ErrAttemptFailed, order.ErrOrderPlaced,
		order.ErrOrderLimitReached} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// unavailable reports whether err means the database did not answer (as
// opposed to answering no): worth retrying later, not a bug in the request.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return true
		case strings.HasPrefix(pe.Code, "53"): // insufficient resources: too many connections, disk full
			return true
		case strings.HasPrefix(pe.Code, "57P"): // admin/crash shutdown, cannot connect now
			return true
		case pe.Code == "57014", pe.Code == "55P03", pe.Code == "25P03":
			// canceled by statement timeout, lock timeout, idle-in-transaction timeout
			return true
		case pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock: retry
			return true
		}
		return false // the server answered: bad SQL, constraint, auth...
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) || errors.As(err, &ce) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		// The transaction's deadline passed and database/sql rolled it
		// back before its COMMIT went out.
		errors.Is(err, sql.ErrTxDone) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) ||
		pgconn.Timeout(err) || pgconn.SafeToRetry(err)
}

// nothingStored reports whether a transaction that failed with err is
// known not to have committed: the server answered a statement with an
// error (the transaction is aborted, its COMMIT never succeeds), the
// failure came before anything was sent (no connection; pgconn.SafeToRetry),
// or database/sql had rolled the transaction back when its deadline passed
// (sql.ErrTxDone: its COMMIT never went out).
func nothingStored(err error) bool {
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	return errors.As(err, &pe) || errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, sql.ErrTxDone)
}

// pgCode returns err's SQLSTATE and constraint name, "" when it has none.
func pgCode(err error) (code, constraint string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.ConstraintName
	}
	return "", ""
}
