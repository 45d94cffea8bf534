package reconcile

import (
	"errors"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// ChatReport is what one chat run did. Counts are of this run only.
type ChatReport struct {
	Workspace ids.WorkspaceID
	Chat      ids.ChatID
	Kind      Kind
	// Bound is the earliest instant the run could read (max(workspace created,
	// now − lookback, now − retention)); [Start, End) is the range it read.
	Bound, Start, End time.Time
	// Pages counts chat container pages, ThreadPages thread container pages,
	// Threads the threads read.
	Pages, ThreadPages, Threads int
	// Messages counts distinct in-range history messages; each is Produced (a new
	// or changed version acknowledged by Kafka), Unchanged, Stale (the stored
	// version is newer or deleted) or Invalid (rejected by the normalizer).
	Messages, Produced, Unchanged, Stale, Invalid int
	// CoveredUntil is the chat's checkpoint after the run: history is collected for
	// every message created before it (zero: no checkpoint).
	CoveredUntil time.Time
	// Complete: the run reached the end of its range.
	Complete bool
	// Stopped says why an incomplete run ended early without failing: ErrPageBudget,
	// ErrIneligible, ErrNotGroupChat or ErrShuttingDown. Skipped: another run of the same chat was in
	// progress.
	Stopped error
	Skipped bool
	// Fresh: a run left out without a history call: an interval pass's incremental
	// run of a chat that a coverage run started within max(ReconcileInterval, Window)
	// read to its end, or a coverage run of a chat whose checkpoint already covers
	// the window.
	Fresh bool
	// Err is a failure; the checkpoint stayed at the last committed page batch.
	Err      error
	Duration time.Duration
}

// result is the result label of larkline_reconcile_runs_total.
func (r *ChatReport) result() string {
	switch {
	case r.Err != nil:
		return "failed"
	case r.Skipped:
		return "skipped"
	case r.Fresh:
		return "fresh"
	case r.Complete:
		return "complete"
	case errors.Is(r.Stopped, ErrPageBudget):
		return "truncated"
	case errors.Is(r.Stopped, ErrNotGroupChat):
		return "refused"
	}
	return "stopped"
}

// PassReport is one automatic pass over every eligible chat.
type PassReport struct {
	Started, Finished time.Time
	Chats             []ChatReport
	// Lag is the time between Finished and the oldest coverage of the pass's chats
	// (larkline_reconcile_lag_seconds).
	Lag time.Duration
}

// Failed counts the pass's failed chat runs.
func (p PassReport) Failed() int {
	n := 0
	for i := range p.Chats {
		if p.Chats[i].Err != nil {
			n++
		}
	}
	return n
}

// RefreshReport is one manual Refresh of a workspace.
type RefreshReport struct {
	Workspace ids.WorkspaceID
	Chats     []ChatReport
}
