package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/larkline/larkline/schemas/ids"
)

// demoResult is the document `larkline demo --once --format json` prints.
type demoResult struct {
	// Complete is false when --once gave up at its timeout; WaitingFor then names
	// what the pipeline had not finished (deliveries, reconciliation, consumer lag,
	// windows).
	Complete   bool            `json:"complete"`
	WaitingFor []string        `json:"waiting_for,omitempty"`
	Workspaces []demoWorkspace `json:"workspaces"`
}

type demoWorkspace struct {
	ID       string         `json:"id"`
	Evidence demoEvidence   `json:"evidence"`
	Windows  []demoWindow   `json:"windows"`
	Entries  []demoEntry    `json:"entries"`
	Summary  *demoSummary   `json:"summary"`
	Progress map[string]int `json:"-"`
}

type demoEvidence struct {
	Total             int `json:"total"`
	SynthesisEligible int `json:"synthesis_eligible"`
	Redacted          int `json:"redacted"`
}

type demoWindow struct {
	ChatID        string    `json:"chat_id"`
	Start         time.Time `json:"start"`
	Status        string    `json:"status"`
	EvidenceCount int       `json:"evidence_count"`
}

type demoEntry struct {
	ID         int64     `json:"id"`
	OccurredAt time.Time `json:"occurred_at"`
	Kind       string    `json:"kind"`
	Title      string    `json:"title"`
	Body       string    `json:"body"`
	Status     string    `json:"status"`
	Source     string    `json:"source"`
	Evidence   []string  `json:"evidence"`
}

type demoSummary struct {
	Source string `json:"source"`
	Text   string `json:"text"`
}

// collectDemoResult reads the outcome of the run from Postgres (read-only).
func collectDemoResult(ctx context.Context, pool *pgxpool.Pool, workspaces []ids.WorkspaceID) (demoResult, error) {
	var res demoResult
	for _, ws := range workspaces {
		w := demoWorkspace{ID: string(ws), Windows: []demoWindow{}, Entries: []demoEntry{}}
		err := pool.QueryRow(ctx, `
			SELECT count(*), count(*) FILTER (WHERE synthesis_eligible), count(*) FILTER (WHERE deleted)
			FROM workspace_timeline_evidence WHERE workspace_id = $1 AND source = $2 AND source_type = $3`,
			ws, ids.SourceLark, ids.SourceTypeLarkMessage).Scan(&w.Evidence.Total, &w.Evidence.SynthesisEligible, &w.Evidence.Redacted)
		if err != nil {
			return res, fmt.Errorf("reading evidence counts: %w", err)
		}
		rows, err := pool.Query(ctx, `
			SELECT source_key, coalesce(status, ''), coalesce((metadata_json->>'evidence_count')::int, 0)
			FROM workspace_timeline_sync_states
			WHERE workspace_id = $1 AND source = $2 AND source_type = $3
			ORDER BY source_key`, ws, ids.SourceSystem, ids.SourceTypeLarkWindow)
		if err != nil {
			return res, fmt.Errorf("reading windows: %w", err)
		}
		for rows.Next() {
			var key string
			var win demoWindow
			if err := rows.Scan(&key, &win.Status, &win.EvidenceCount); err != nil {
				rows.Close()
				return res, err
			}
			// chat/<chat>/window/<start> or chat/<chat>/processor/<v>/window/<start>
			parts := strings.Split(key, "/")
			if len(parts) >= 4 {
				win.ChatID = parts[1]
				win.Start, _ = time.Parse(time.RFC3339, parts[len(parts)-1])
			}
			w.Windows = append(w.Windows, win)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, err
		}
		sort.Slice(w.Windows, func(i, j int) bool {
			if !w.Windows[i].Start.Equal(w.Windows[j].Start) {
				return w.Windows[i].Start.Before(w.Windows[j].Start)
			}
			return w.Windows[i].ChatID < w.Windows[j].ChatID
		})
		rows, err = pool.Query(ctx, `
			SELECT e.id, e.occurred_at, e.kind, e.title, e.body, e.status, e.source,
			       coalesce(array_agg(split_part(ev.source_key, '/', 4) ORDER BY ev.occurred_at, ev.id)
			                FILTER (WHERE ev.id IS NOT NULL), '{}')
			FROM workspace_timeline_entries e
			LEFT JOIN workspace_timeline_entry_evidence b ON b.entry_id = e.id
			LEFT JOIN workspace_timeline_evidence ev ON ev.id = b.evidence_id
			WHERE e.workspace_id = $1 AND e.status <> 'hidden'
			GROUP BY e.id ORDER BY e.occurred_at, e.id`, ws)
		if err != nil {
			return res, fmt.Errorf("reading entries: %w", err)
		}
		for rows.Next() {
			var e demoEntry
			if err := rows.Scan(&e.ID, &e.OccurredAt, &e.Kind, &e.Title, &e.Body, &e.Status, &e.Source, &e.Evidence); err != nil {
				rows.Close()
				return res, err
			}
			w.Entries = append(w.Entries, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, err
		}
		var s demoSummary
		err = pool.QueryRow(ctx, `SELECT source, text FROM workspace_timeline_summaries WHERE workspace_id = $1`, ws).Scan(&s.Source, &s.Text)
		if err == nil {
			w.Summary = &s
		}
		res.Workspaces = append(res.Workspaces, w)
	}
	return res, nil
}

func writeDemoResult(w io.Writer, res demoResult, format string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	var b strings.Builder
	if !res.Complete {
		fmt.Fprintf(&b, "# INCOMPLETE: the pipeline had not finished (waiting for: %s)\n\n", strings.Join(res.WaitingFor, "; "))
	}
	for _, ws := range res.Workspaces {
		fmt.Fprintf(&b, "# Workspace %s\n\n", ws.ID)
		if ws.Summary != nil {
			fmt.Fprintf(&b, "## Summary (%s)\n\n%s\n\n", ws.Summary.Source, ws.Summary.Text)
		} else {
			b.WriteString("## Summary\n\n_No summary yet._\n\n")
		}
		fmt.Fprintf(&b, "## Timeline (%d entries)\n\n", len(ws.Entries))
		for _, e := range ws.Entries {
			fmt.Fprintf(&b, "- **%s** `%s` %s — %s _(%s, %s; evidence: %s)_\n", e.OccurredAt.UTC().Format("15:04"), e.Kind,
				e.Title, oneLine(e.Body, 160), e.Status, e.Source, strings.Join(e.Evidence, ", "))
		}
		counts := map[string]int{}
		for _, win := range ws.Windows {
			counts[win.Status]++
		}
		fmt.Fprintf(&b, "\n## Windows\n\n%d non-empty windows: %d completed, %d ignored, %d failed, %d processing\n",
			len(ws.Windows), counts["completed"], counts["ignored"], counts["failed"], counts["processing"])
		fmt.Fprintf(&b, "\n## Evidence\n\n%d messages, %d eligible for synthesis, %d redacted\n\n",
			ws.Evidence.Total, ws.Evidence.SynthesisEligible, ws.Evidence.Redacted)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max]) + "…"
	}
	return s
}
