package reconcile

import (
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
)

// Kind says why a chat run reads the range it reads.
type Kind string

// Run kinds.
const (
	// KindBackfill: the chat has no complete scan yet; read from the bound (design
	// §8.1: max(workspace.created_at, now − lookback)) to now, or, when an earlier
	// backfill stopped before its end, from its checkpoint minus the overlap.
	KindBackfill Kind = "backfill"
	// KindIncremental: read from the checkpoint minus the overlap (design §8.2).
	KindIncremental Kind = "incremental"
	// KindRefresh: the larger evidence refresh over EvidenceRefreshLookback, due
	// every EvidenceRefreshInterval; it turns edits and recalls into new versions.
	KindRefresh Kind = "refresh"
	// KindManual: an operator's Refresh of a workspace: the whole bounded range.
	KindManual Kind = "manual"
)

// IngestPath is the evidence ingest path a run of this kind produces.
func (k Kind) IngestPath() schemas.IngestPath {
	switch k {
	case KindRefresh:
		return schemas.IngestRefresh
	case KindManual:
		return schemas.IngestManual
	}
	return schemas.IngestReconcile
}

// planInput is everything that decides a chat run's range.
type planInput struct {
	now              time.Time
	workspaceCreated time.Time
	checkpoint       *store.Checkpoint // nil: none yet
	manual           bool
	// coverage: a coverage run (schedule.go) stays incremental when a refresh is
	// due; the interval pass refreshes.
	coverage bool
	// continued: the continuation of a truncated run starts at the checkpoint.
	continued bool

	lookback, retention, settle, overlap time.Duration
	refreshInterval, refreshLookback     time.Duration
}

// plan is a chat run's range [start, end): messages created at or after start and
// before end. end is a whole second (Lark's end_time unit); start is exact, sent
// rounded down to its second, and items before it are dropped.
type plan struct {
	kind  Kind
	bound time.Time // nothing before it is ever read or produced
	start time.Time
	end   time.Time
	// fullScan: a complete run of this plan has read (possibly across several
	// backfill runs) everything a refresh would, so it records LastFullScanAt.
	fullScan bool
}

// empty reports whether the range holds no instant.
func (p plan) empty() bool { return !p.start.Before(p.end) }

// makePlan decides the range of one chat run (design §8.1, §8.2; every range is
// capped by the workspace's creation time, the lookback and the retention).
func makePlan(in planInput) plan {
	bound := in.workspaceCreated.UTC()
	if b := in.now.Add(-in.lookback); b.After(bound) {
		bound = b
	}
	if in.retention > 0 {
		if b := in.now.Add(-in.retention); b.After(bound) {
			bound = b
		}
	}
	p := plan{bound: bound, end: time.Unix(in.now.Add(-in.settle).Unix(), 0).UTC()}
	refreshFrom := in.now.Add(-in.refreshLookback)
	switch {
	case in.manual:
		p.kind, p.start = KindManual, bound
	case in.checkpoint == nil:
		p.kind, p.start = KindBackfill, bound
	case in.checkpoint.Meta.LastFullScanAt == nil:
		// A backfill that has not reached its end yet (page budget, restart):
		// it continues from its checkpoint, re-reading only the overlap.
		p.kind, p.start = KindBackfill, in.checkpoint.Position.Time.Add(-in.overlap)
	default:
		p.kind, p.start = KindIncremental, in.checkpoint.Position.Time.Add(-in.overlap)
		if !in.coverage && !in.continued && in.now.Sub(*in.checkpoint.Meta.LastFullScanAt) >= in.refreshInterval {
			p.kind = KindRefresh
			// The refresh range always contains the incremental one, so a chat
			// whose checkpoint lags more than the refresh lookback loses nothing.
			if refreshFrom.Before(p.start) {
				p.start = refreshFrom
			}
		}
	}
	if in.continued && in.checkpoint != nil && p.kind != KindRefresh && p.kind != KindManual {
		p.start = in.checkpoint.Position.Time // the run it continues read the overlap
	}
	if p.start.Before(bound) {
		p.start = bound
	}
	p.start = p.start.UTC()
	p.fullScan = p.kind != KindIncremental || !p.start.After(bound) || !p.start.After(refreshFrom)
	return p
}
