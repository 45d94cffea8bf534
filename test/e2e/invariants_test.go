package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

// humanContent is what a person wrote before the run: it must come out untouched.
type humanContent struct {
	workspace ids.WorkspaceID
	entry     store.Entry
	summary   string
}

// writeHumanContent gives the scenario's first workspace a human entry and a human
// summary.
func (p *pipeline) writeHumanContent(ctx context.Context) humanContent {
	p.t.Helper()
	ws := p.sc.Workspaces()[0]
	first, _ := p.sc.Bounds()
	e, err := p.store.CreateHumanEntry(ctx, store.HumanEntry{
		Workspace: ws.ID, OccurredAt: first.Add(3 * time.Minute), Kind: "decision",
		Title: "Incident commander: freeze all deploys", Body: "Written by a person before the pipeline ran.",
	})
	if err != nil {
		p.t.Fatalf("writing the human entry: %v", err)
	}
	const summary = "Human summary: checkout degraded, rollback in progress."
	if err := p.store.PutHumanSummary(ctx, ws.ID, summary); err != nil {
		p.t.Fatalf("writing the human summary: %v", err)
	}
	return humanContent{workspace: ws.ID, entry: e, summary: summary}
}

// expectedEvidence is one evidence row per scenario message and bound workspace of its
// chat: workspace → set of message source keys.
func (p *pipeline) expectedEvidence() map[ids.WorkspaceID]map[string]bool {
	bound := map[ids.ChatID][]ids.WorkspaceID{}
	for _, b := range p.sc.Bindings() {
		if !slices.Contains(p.ineligible, b.WorkspaceID) {
			bound[b.ChatID] = append(bound[b.ChatID], b.WorkspaceID)
		}
	}
	// One pass over the messages: waitDone calls this every second, and a load of
	// 240,000 messages over 1,000 bound chats took minutes per call when each
	// binding summarised every message again.
	out := map[ids.WorkspaceID]map[string]bool{}
	for _, m := range p.sc.Messages() {
		for _, ws := range bound[m.ChatID] {
			if out[ws] == nil {
				out[ws] = map[string]bool{}
			}
			out[ws][ids.MessageSourceKey(m.ChatID, m.ID)] = true
		}
	}
	return out
}

// progress is the pipeline's state as the database shows it.
type progress struct {
	evidence, expected int
	windows, terminal  int
	failed             int
	entries            int
}

func (g progress) String() string {
	return fmt.Sprintf("evidence %d/%d, windows terminal %d/%d (failed %d), entries %d",
		g.evidence, g.expected, g.terminal, g.windows, g.failed, g.entries)
}

func (g progress) done() bool {
	return g.evidence >= g.expected && g.windows > 0 && g.terminal >= g.windows
}

func (p *pipeline) progress(ctx context.Context) (progress, error) {
	g := progress{}
	var ws []ids.WorkspaceID
	for w, keys := range p.expectedEvidence() {
		ws = append(ws, w)
		g.expected += len(keys)
	}
	st, err := p.store.Progress(ctx, ws, p.window, p.version, 3)
	if err != nil {
		return g, err
	}
	// a window needing attention is terminal, but never what a test wants: shown as failed
	g.evidence, g.windows, g.terminal, g.failed, g.entries = st.Evidence, st.Windows, st.Completed+st.Ignored, st.Failed+st.NeedsAttention, st.AIEntries
	return g, nil
}

// waitDone polls until every expected evidence row exists and every non-empty window
// is terminal, or fails the test after the deadline with the state and log tails.
func (p *pipeline) waitDone(ctx context.Context, deadline time.Duration) progress {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var last progress
	var lastErr error
	for {
		g, err := p.progress(ctx)
		if err == nil {
			if g != last {
				p.t.Logf("%s progress: %s", time.Now().UTC().Format("15:04:05.000"), g)
			}
			last = g
			if g.done() {
				return g
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("pipeline not done after %s: %s (last error %v; restarts %v; evidence lag %s)", deadline, last, lastErr, p.restarts(), p.evidenceLag())
		case <-time.After(time.Second):
		}
	}
}

// checkInvariants asserts issue #9's "nothing lost" on the database: evidence exactly
// once per bound workspace, one terminal state per non-empty window, no duplicate
// entries, every AI entry traceable to evidence, human content untouched.
func (p *pipeline) checkInvariants(ctx context.Context) error {
	var errs []error
	want := p.expectedEvidence()
	for ws, keys := range want {
		rows, err := p.pool.Query(ctx, `
			SELECT source_key, count(*) FROM workspace_timeline_evidence
			WHERE workspace_id = $1 AND source = 'lark' AND source_type = 'lark_message'
			GROUP BY source_key`, string(ws))
		if err != nil {
			return err
		}
		got := map[string]int{}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return err
			}
			got[k] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var missing, extra, dup []string
		for k := range keys {
			switch n := got[k]; {
			case n == 0:
				missing = append(missing, k)
			case n > 1:
				dup = append(dup, k)
			}
		}
		for k := range got {
			if !keys[k] {
				extra = append(extra, k)
			}
		}
		if len(missing)+len(extra)+len(dup) > 0 {
			slices.Sort(missing)
			errs = append(errs, fmt.Errorf("workspace %s evidence: %d missing %v, %d unexpected %v, %d duplicated %v",
				ws, len(missing), head(missing), len(extra), head(extra), len(dup), head(dup)))
		}
	}

	// One state row per non-empty window, terminal; none for a window without evidence.
	g, err := p.progress(ctx)
	if err != nil {
		return err
	}
	if g.windows == 0 || g.terminal != g.windows || g.failed != 0 {
		errs = append(errs, fmt.Errorf("windows: %s", g))
	}
	var orphanStates, extraStates int
	if err := p.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE NOT EXISTS (
			SELECT 1 FROM workspace_timeline_evidence e
			WHERE e.workspace_id = s.workspace_id AND e.occurred_at >= (s.metadata_json->>'window_start')::timestamptz
			  AND e.occurred_at < (s.metadata_json->>'window_end')::timestamptz)),
		       count(*) - count(DISTINCT (workspace_id, source_key))
		FROM workspace_timeline_sync_states s
		WHERE source = 'system' AND source_type = 'lark_timeline_window'`).Scan(&orphanStates, &extraStates); err != nil {
		return fmt.Errorf("counting window states: %w", err)
	}
	if orphanStates != 0 || extraStates != 0 {
		errs = append(errs, fmt.Errorf("window states: %d without evidence in their window, %d duplicated", orphanStates, extraStates))
	}

	// No duplicate entries: no two AI entries of a workspace with the same kind, title
	// and time, and every AI entry bound to evidence of its own workspace.
	var dupEntries, unbound int
	if err := p.pool.QueryRow(ctx, `
		SELECT
			(SELECT count(*) - count(DISTINCT (workspace_id, kind, title, occurred_at)) FROM workspace_timeline_entries WHERE source = 'ai'),
			(SELECT count(*) FROM workspace_timeline_entries t WHERE source = 'ai' AND NOT EXISTS (
				SELECT 1 FROM workspace_timeline_entry_evidence b JOIN workspace_timeline_evidence e ON e.id = b.evidence_id
				WHERE b.entry_id = t.id AND e.workspace_id = t.workspace_id))`).Scan(&dupEntries, &unbound); err != nil {
		return fmt.Errorf("counting entries: %w", err)
	}
	if dupEntries != 0 || unbound != 0 {
		errs = append(errs, fmt.Errorf("entries: %d duplicates, %d AI entries bound to no evidence of their workspace", dupEntries, unbound))
	}
	d, err := p.entryDuplicates(ctx)
	if err != nil {
		return err
	}
	if d.count() != 0 {
		errs = append(errs, fmt.Errorf("entries the fingerprint index let through: %s", d))
	}

	errs = append(errs, p.humanChanges(ctx)...)
	return errors.Join(errs...)
}

// humanChanges is what became of the human entry and summary written before the run:
// nothing, or one error for each that changed.
func (p *pipeline) humanChanges(ctx context.Context) []error {
	var errs []error
	h := p.human
	e, err := p.store.GetEntry(ctx, h.workspace, h.entry.ID)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("human entry %d: %w", h.entry.ID, err))
	case e.Title != h.entry.Title || e.Body != h.entry.Body || e.Kind != h.entry.Kind || e.Status != h.entry.Status ||
		e.Source != store.EntryFromHuman || !e.OccurredAt.Equal(h.entry.OccurredAt):
		errs = append(errs, fmt.Errorf("human entry %d changed: %+v, was %+v", h.entry.ID, e, h.entry))
	}
	s, err := p.store.GetSummary(ctx, h.workspace)
	if err != nil || s.Source != store.EntryFromHuman || s.Text != h.summary {
		errs = append(errs, fmt.Errorf("human summary of %s changed (source %s, err %v)", h.workspace, s.Source, err))
	}
	return errs
}

// entryDups are AI entries that duplicate a fact although the unique index on
// (workspace_id, fingerprint) holds: the index only says no two entries share a
// fingerprint, not that every entry has the fingerprint of its fact.
type entryDups struct {
	// noFingerprint: AI entries without one (the index is partial: WHERE fingerprint
	// IS NOT NULL, so these are never deduplicated).
	noFingerprint []string
	// wrongFingerprint: entries whose fingerprint is not synth.Fingerprint of their
	// workspace, kind and cited evidence (a repeat of the fact would get another).
	wrongFingerprint []string
	// sharedEvidence: an evidence row bound to two AI entries of one kind (the same
	// fact written twice under two anchors, as a re-run that chunked or grouped a
	// window differently would).
	sharedEvidence []string
}

func (d entryDups) count() int {
	return len(d.noFingerprint) + len(d.wrongFingerprint) + len(d.sharedEvidence)
}

func (d entryDups) String() string {
	return fmt.Sprintf("%d without a fingerprint %v, %d with a fingerprint not of their fact %v, %d evidence rows cited by two entries of one kind %v",
		len(d.noFingerprint), head(d.noFingerprint), len(d.wrongFingerprint), head(d.wrongFingerprint),
		len(d.sharedEvidence), head(d.sharedEvidence))
}

// entryDuplicates reads every AI entry and its bindings and reports what the unique
// index does not already rule out.
func (p *pipeline) entryDuplicates(ctx context.Context) (entryDups, error) {
	var d entryDups
	rows, err := p.pool.Query(ctx, `
		SELECT id, workspace_id, kind, coalesce(fingerprint, ''),
		       coalesce((SELECT array_agg((ev->>'id')::bigint) FROM jsonb_array_elements(ai_metadata->'evidence') ev), '{}')
		FROM workspace_timeline_entries WHERE source = 'ai'`)
	if err != nil {
		return d, fmt.Errorf("reading AI entries: %w", err)
	}
	for rows.Next() {
		var id int64
		var ws, kind, fp string
		var evidence []int64
		if err := rows.Scan(&id, &ws, &kind, &fp, &evidence); err != nil {
			rows.Close()
			return d, err
		}
		switch want := synth.Fingerprint(ids.WorkspaceID(ws), synth.Draft{Kind: synth.Kind(kind), EvidenceIDs: evidence}); {
		case fp == "":
			d.noFingerprint = append(d.noFingerprint, fmt.Sprint(id))
		case fp != want:
			d.wrongFingerprint = append(d.wrongFingerprint, fmt.Sprintf("%d (%s, want %s)", id, fp, want))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return d, err
	}
	rows, err = p.pool.Query(ctx, `
		SELECT b.evidence_id, t.kind, array_agg(t.id ORDER BY t.id)
		FROM workspace_timeline_entry_evidence b JOIN workspace_timeline_entries t ON t.id = b.entry_id
		WHERE t.source = 'ai'
		GROUP BY b.evidence_id, t.workspace_id, t.kind HAVING count(*) > 1`)
	if err != nil {
		return d, fmt.Errorf("reading entry bindings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ev int64
		var kind string
		var entries []int64
		if err := rows.Scan(&ev, &kind, &entries); err != nil {
			return d, err
		}
		d.sharedEvidence = append(d.sharedEvidence, fmt.Sprintf("evidence %d in %s entries %v", ev, kind, entries))
	}
	return d, rows.Err()
}

func head(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + ", …"
	}
	return strings.Join(s, ", ")
}
