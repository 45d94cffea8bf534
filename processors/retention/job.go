package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/schemas/ids"
)

// advisoryLockKey is the Postgres advisory lock every (non-dry) run holds: the bytes
// of "larkret\x01" as a big-endian int64. Documented in docs/operations.md.
const advisoryLockKey int64 = 0x6c61726b72657401

// Report says what one run did (or, in a dry run, would do).
type Report struct {
	DryRun bool
	Mode   Mode
	// Cutoff is now − retention: evidence strictly before it was due.
	Cutoff time.Time
	// Redacted and Deleted count evidence rows changed (due, in a dry run).
	Redacted int64
	Deleted  int64
	// CheckpointsRemoved counts chat collection checkpoints of aged-out workspaces
	// removed; AgedOutWorkspaces the workspaces they belonged to.
	CheckpointsRemoved int64
	AgedOutWorkspaces  int64
	// WindowsRemoved counts synthesis window states removed.
	WindowsRemoved int64
	// Published counts records acknowledged by Kafka: redacted versions and
	// tombstones (to be published, in a dry run).
	Published int64
	// Unpublishable counts due rows without a valid evidence key: changed in
	// Postgres only.
	Unpublishable int64
	// Complete is false when the run stopped early (MaxRunTime, cancellation, a
	// failure); the next run carries on.
	Complete bool
	Duration time.Duration
}

// Job is the retention job. Run it periodically with Run, or once with RunOnce.
type Job struct {
	o   Options
	cl  *kgo.Client
	db  *pgxpool.Pool
	m   *metrics
	log *slog.Logger

	// life ends Run and every RunOnce at Close, and Close waits for them.
	life *lifecycle.State
}

// New validates o, creates the producer (it connects on first use) and registers the
// metrics.
func New(o Options) (*Job, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	kopts, err := kafka.NewClientOptions(o.Kafka)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		m.unregister()
		return nil, fmt.Errorf("retention: creating kafka client: %w", err)
	}
	return &Job{
		life: lifecycle.New("retention job", lifecycle.Once, ErrClosed),
		o:    o,
		cl:   cl,
		db:   o.Pool,
		m:    m,
		log:  o.Logger.With("component", string(ids.StageRetention)),
	}, nil
}

// Run runs a retention pass at once and then every Options.Interval until ctx ends or
// Close is called, and returns nil then. A failed pass is logged and counted and the
// next one runs at the next interval; a pass that finds another holding the lock
// (ErrBusy) is skipped. Run may be called once.
func (j *Job) Run(ctx context.Context) error {
	ctx, end, err := j.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()

	j.log.Info("retention job started", "mode", string(j.o.Mode), "retention", j.o.Retention, "interval", j.o.Interval)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			j.log.Info("retention job stopped")
			return nil
		case <-t.C:
		}
		_, err := j.RunOnce(ctx, false)
		switch {
		case err == nil:
		case errors.Is(err, ErrBusy):
			j.log.Info("retention pass skipped: another run holds the lock")
		case errors.Is(err, ErrClosed), ctx.Err() != nil:
			// ends at the select
		default:
			j.log.Error("retention pass failed; retrying at the next interval", "retryable", IsRetryable(err), "error", err)
		}
		t.Reset(j.o.Interval)
	}
}

// Close ends a running Run or RunOnce (a batch acknowledged by Kafka still gets its
// database change), waits for them, unregisters the metrics and closes the
// producer. It is idempotent.
func (j *Job) Close() error {
	if !j.life.Close() {
		return nil
	}
	j.m.unregister()
	j.cl.Close()
	return nil
}

// RunOnce runs one retention pass. With dryRun it writes nothing (no lock, no
// records, no database change, no row metrics) and reports what a run would do now.
// Otherwise it takes the retention lock (ErrBusy if held), and redacts or deletes the
// due evidence, removes the checkpoints of aged-out workspaces and stale window
// states, publishing before each database change. The Report is valid, with the work
// done so far, even when an error is returned.
func (j *Job) RunOnce(ctx context.Context, dryRun bool) (Report, error) {
	ctx, leave, err := j.life.Enter(ctx)
	if err != nil {
		return Report{DryRun: dryRun, Mode: j.o.Mode}, err
	}
	defer leave()

	began := time.Now()
	r := &run{
		j:   j,
		dry: dryRun,
		// Postgres keeps microseconds: a finer cutoff would compare differently in
		// SQL and in Go.
		cutoff:   j.o.Clock().Add(-j.o.Retention).UTC().Truncate(time.Microsecond),
		deadline: began.Add(j.o.MaxRunTime),
		rep:      Report{DryRun: dryRun, Mode: j.o.Mode},
	}
	r.rep.Cutoff = r.cutoff

	if !dryRun {
		var unlock func()
		unlock, err = j.lock(ctx)
		if err != nil {
			r.rep.Duration = time.Since(began)
			return r.rep, err
		}
		defer unlock()
	}
	err = r.all(ctx)
	r.rep.Duration = time.Since(began)
	attrs := []any{"dry_run", dryRun, "mode", string(j.o.Mode), "cutoff", r.cutoff,
		"redacted", r.rep.Redacted, "deleted", r.rep.Deleted, "published", r.rep.Published,
		"checkpoints_removed", r.rep.CheckpointsRemoved, "aged_out_workspaces", r.rep.AgedOutWorkspaces,
		"windows_removed", r.rep.WindowsRemoved, "unpublishable", r.rep.Unpublishable,
		"complete", r.rep.Complete, "duration", r.rep.Duration}
	if err != nil {
		// A run cut short by shutdown is not a failure of a dependency.
		if reason, ok := failureReason(err); ok && ctx.Err() == nil {
			j.m.failures.WithLabelValues(reason).Inc()
		}
		j.log.Warn("retention pass ended with an error", append(attrs, "error", err)...)
		return r.rep, err
	}
	if !r.rep.Complete {
		j.log.Warn("retention pass stopped at its time bound; the next pass carries on", attrs...)
		return r.rep, nil
	}
	if !dryRun {
		j.m.lastSuccess.Set(float64(time.Now().UnixNano()) / 1e9)
	}
	j.log.Info("retention pass done", attrs...)
	return r.rep, nil
}

// lock takes the advisory lock on a dedicated connection; unlock releases both.
func (j *Job) lock(ctx context.Context) (unlock func(), err error) {
	lctx, cancel := context.WithTimeout(ctx, j.o.DBTimeout)
	defer cancel()
	conn, err := j.db.Acquire(lctx)
	if err != nil {
		j.m.failures.WithLabelValues(reasonPostgres).Inc()
		return nil, fmt.Errorf("retention: acquiring a connection for the lock: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(lctx, `SELECT pg_try_advisory_lock($1)`, advisoryLockKey).Scan(&ok); err != nil {
		conn.Release()
		j.m.failures.WithLabelValues(reasonPostgres).Inc()
		return nil, fmt.Errorf("retention: taking the advisory lock: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, ErrBusy
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), j.o.DBTimeout)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, advisoryLockKey); err != nil {
			// The session still holds the lock: close it rather than return it to
			// the pool, which releases the lock with the session.
			j.log.Warn("releasing the retention lock failed; closing its connection", "error", err)
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, nil
}

// run is the state of one pass.
type run struct {
	j        *Job
	dry      bool
	cutoff   time.Time
	deadline time.Time
	rep      Report
}

// all runs the three parts in order; each stops at the deadline.
func (r *run) all(ctx context.Context) error {
	for _, part := range []func(context.Context) (bool, error){r.evidence, r.checkpoints, r.windows} {
		done, err := part(ctx)
		if err != nil {
			return err
		}
		if !done {
			return nil
		}
	}
	r.rep.Complete = true
	return nil
}

// more reports whether the pass may start another batch.
func (r *run) more(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return time.Now().Before(r.deadline), nil
}

// produce publishes recs and waits for every acknowledgement, bounded by
// ProduceTimeout. In a dry run it only counts.
func (r *run) produce(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if r.dry {
		r.rep.Published += int64(len(recs))
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, r.j.o.ProduceTimeout)
	defer cancel()
	var (
		errs  []error
		acked int64
	)
	for _, res := range r.j.cl.ProduceSync(pctx, recs...) {
		if res.Err != nil {
			errs = append(errs, res.Err)
			continue
		}
		acked++
	}
	r.rep.Published += acked
	if len(errs) > 0 {
		return failed(reasonKafka, fmt.Errorf("retention: %d of %d records to %s not acknowledged, database left unchanged for them: %w",
			len(errs), len(recs), recs[0].Topic, errs[0]))
	}
	return nil
}

// dbCtx bounds one statement. After Kafka acknowledged a batch its database change
// must still happen when the run is being cancelled, so it does not inherit
// cancellation, only the DBTimeout.
func (r *run) dbCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.j.o.DBTimeout)
}

// queryCtx bounds a read, which cancellation may interrupt.
func (r *run) queryCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.j.o.DBTimeout)
}
