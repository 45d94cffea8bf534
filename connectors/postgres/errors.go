package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// Dead-letter reasons the sink adds to those of package schemas (schemas.ReasonOf:
// malformed, unknown_schema, newer_schema, wrong_record_type, incompatible_schema,
// invalid_record, other). Together they are the bounded label set of
// larkline_sink_dead_lettered_total.
const (
	// ReasonInvalidKey: a tombstone (nil value) whose key is not
	// <workspace>/<chat>/<message>, so there is no row it could delete.
	ReasonInvalidKey = "invalid_key"
	// ReasonKeyMismatch: a record whose Kafka key is not the key its value names;
	// writing it would let compaction and tombstones of that key miss the row.
	ReasonKeyMismatch = "key_mismatch"
	// ReasonStoreInvalid: the store's validation rejected the row (store.ErrInvalid),
	// e.g. metadata that jsonb cannot hold.
	ReasonStoreInvalid = "store_invalid"
	// ReasonConstraint: Postgres rejected the row with a data exception or an
	// integrity constraint violation (SQLSTATE class 22 or 23).
	ReasonConstraint = "constraint"
)

// Sentinel errors of Run and Close.
var (
	// ErrAlreadyRunning: Run was called a second time (a Sink runs once).
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
	// ErrClosed: Run was called after Close.
	ErrClosed = errors.New("postgres sink: closed")
	// ErrFatal wraps an error that stopped the sink because retrying cannot help
	// and no record is to blame: the database refuses every write (an undefined
	// table, a permission), a dead letter cannot be produced at all, or the Kafka
	// client failed for good. Nothing of the in-flight batch was committed; it is
	// delivered again after a restart.
	ErrFatal = errors.New("postgres sink: stopped")
)

// abortError ends a batch without committing it: its records are delivered again.
type abortError struct{ cause string }

func (e *abortError) Error() string { return "batch aborted: " + e.cause }

// Abort causes (label values of larkline_sink_batches_aborted_total).
const (
	abortRebalance = "rebalance"
	abortShutdown  = "shutdown"
	abortCommit    = "commit"
)

// class is how the sink treats a failure.
type class int

const (
	classRetry class = iota + 1 // try the same thing again after a pause
	classData                   // the record (or one of the records) is to blame: isolate and park it
	classFatal                  // stop the sink
)

// classifyDB decides what a store error means for the sink: store.IsRetryable is the
// retry decision of the database boundary; errors caused by a row's data are isolated
// and dead-lettered; anything else stops the sink rather than parking good records.
func classifyDB(err error) class {
	switch {
	case store.IsRetryable(err):
		return classRetry
	case errors.Is(err, store.ErrInvalid):
		return classData
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && len(pgErr.Code) == 5 {
		switch pgErr.Code[:2] {
		case "22", "23": // data_exception, integrity_constraint_violation
			return classData
		}
	}
	return classFatal
}

// retryableKafka is the retry decision for the dead-letter producer and the offset
// commit (package kafka's one decision for Kafka I/O).
func retryableKafka(err error) bool { return kafka.IsRetryable(err) }

// retryableDecode: only a schema registry outage makes decoding worth retrying.
func retryableDecode(err error) bool { return schemas.IsRetryable(err) }
