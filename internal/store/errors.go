package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors. Every error the store returns wraps one of these, a Postgres error
// (*pgconn.PgError) or a connection/context error; test with errors.Is and IsRetryable.
var (
	// ErrNotFound: the row (workspace, entry, window state, checkpoint, summary) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-set found the row in another state than expected (a
	// window claimed by someone else, a lost lease, a cursor that would move backwards).
	ErrConflict = errors.New("conflict")
	// ErrHumanOwned: the row's text belongs to a human (a human-created, human-edited,
	// confirmed or hidden entry) and synthesis may not change it.
	ErrHumanOwned = errors.New("human-owned")
	// ErrInvalid: the caller's input was rejected before any write; nothing was written.
	ErrInvalid = errors.New("invalid input")
	// ErrEmptyWindow: a window state was asked for a range that holds no evidence in the
	// database. Empty windows never get a sync-state row (design §10.2); the caller waits
	// for the evidence (the sink may lag) or drops the request.
	ErrEmptyWindow = errors.New("window has no evidence")
	// ErrTooMany: a read that returns a whole set found more rows than its documented bound.
	ErrTooMany = errors.New("too many rows")
)

// IsRetryable reports whether retrying the same call later may succeed: connection
// failures, serialization failures, deadlocks, lock/statement timeouts, resource
// exhaustion, server shutdown and context deadlines. Constraint violations, data
// exceptions, invalid input, conflicts and cancellation by the caller are not retryable.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) || errors.Is(err, ErrHumanOwned) ||
		errors.Is(err, ErrInvalid) || errors.Is(err, ErrEmptyWindow) || errors.Is(err, ErrTooMany) {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return retryableSQLState(pgErr.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// retryableSQLState decides by SQLSTATE (https://www.postgresql.org/docs/current/errcodes-appendix.html).
func retryableSQLState(code string) bool {
	switch code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"55P03", // lock_not_available (lock_timeout)
		"57014", // query_canceled (statement_timeout)
		"57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"57P05": // idle_session_timeout
		return true
	}
	switch {
	case strings.HasPrefix(code, "08"): // connection_exception
		return true
	case strings.HasPrefix(code, "53"): // insufficient_resources
		return true
	}
	return false
}
