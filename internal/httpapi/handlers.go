package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// call is an authorised API request for one existing workspace. ctx is the request's
// context bounded by the store timeout, for store calls; r.Context() stays the client's,
// so that a store timeout is answered (503) while a client that left is not.
type call struct {
	ctx       context.Context
	workspace store.Workspace
	token     string // the grant's name, for audit logs
}

func (c *call) ws() ids.WorkspaceID { return c.workspace.ID }

// api wraps a handler with the access rules (design §15): the token, then the
// workspace id, then the token's scope, then the workspace's existence. The handler
// runs with the store timeout applied to its context.
func (s *Server) api(h func(http.ResponseWriter, *http.Request, *call)) http.Handler {
	return s.apiScoped(0, h)
}

// curate is api for a change: the token needs scope curate or admin.
func (s *Server) curate(h func(http.ResponseWriter, *http.Request, *call)) http.Handler {
	return s.apiScoped(scopeLevel(ScopeCurate), h)
}

func (s *Server) apiScoped(level int, h func(http.ResponseWriter, *http.Request, *call)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, fail := s.auth.authenticate(r)
		if fail != nil {
			s.refuse(w, r, fail, "")
			return
		}
		if g.level < level {
			s.refuse(w, r, failReadOnly, g.name)
			return
		}
		ws, err := ids.ParseWorkspaceID(r.PathValue("workspace"))
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidWorkspaceID, "the workspace id is not valid (letters, digits, _ - . :; at most 128 bytes)")
			return
		}
		if !g.allows(ws) {
			s.refuse(w, r, failForbidden, g.name, slog.String("workspace", string(ws)))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.storeTimeout)
		defer cancel()
		wsRow, err := s.store.GetWorkspace(ctx, ws)
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, codeWorkspaceNotFound, "no such workspace")
			return
		}
		if err != nil {
			s.storeFailure(w, r, "get workspace", err, slog.String("workspace", string(ws)))
			return
		}
		h(w, r, &call{ctx: ctx, workspace: wsRow, token: g.name})
	})
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, f *authFailure, token string, attrs ...slog.Attr) {
	s.metrics.refused(f.code)
	switch f.code {
	case codeMissingToken:
		w.Header().Set("WWW-Authenticate", `Bearer realm="larkline"`)
	case codeInvalidToken:
		w.Header().Set("WWW-Authenticate", `Bearer realm="larkline", error="invalid_token"`)
	}
	level := slog.LevelDebug
	if f.code == codeForbiddenWorkspace || f.code == codeForbiddenScope {
		level = slog.LevelInfo // a valid token reaching outside its scope is worth an audit line
	}
	attrs = append(attrs, slog.String("reason", f.code), slog.String("route", r.Pattern))
	if token != "" {
		attrs = append(attrs, slog.String("token", token))
	}
	s.log.LogAttrs(r.Context(), level, "timeline API request refused", attrs...)
	writeError(w, f.status, f.code, f.message)
}

// ---- evidence ----

type evidenceJSON struct {
	ID               int64           `json:"id"`
	Source           string          `json:"source"`
	SourceType       string          `json:"source_type"`
	SourceKey        string          `json:"source_key"`
	OccurredAt       time.Time       `json:"occurred_at"`
	ActorID          string          `json:"actor_id"`
	ActorDisplayName string          `json:"actor_display_name"`
	Content          string          `json:"content"`
	ContentHash      string          `json:"content_hash"`
	Metadata         json.RawMessage `json:"metadata"`
	// Deleted marks a recalled (redacted) message: its content is gone.
	Deleted bool `json:"deleted"`
}

type evidencePageJSON struct {
	Items      []evidenceJSON `json:"items"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

func toEvidenceJSON(e *store.Evidence) evidenceJSON {
	meta := e.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage("{}")
	}
	return evidenceJSON{
		ID: e.ID, Source: e.Source, SourceType: e.SourceType, SourceKey: e.SourceKey,
		OccurredAt: e.OccurredAt.UTC(), ActorID: e.ActorID, ActorDisplayName: e.ActorDisplayName,
		Content: e.Content, ContentHash: e.ContentHash, Metadata: meta, Deleted: e.Deleted,
	}
}

// listEvidence pages through the workspace's Lark message evidence in (occurred_at,
// id) order. Query: limit (1..MaxPageSize, default DefaultPageSize), cursor (the
// previous page's next_cursor) or since (RFC 3339: start at the first message at or
// after this time; microsecond precision), not both.
func (s *Server) listEvidence(w http.ResponseWriter, r *http.Request, c *call) {
	if !s.evidenceListed {
		writeError(w, http.StatusNotFound, codeEvidenceListingDisabled,
			"Lark evidence is not listed by this server (services.workspace.timeline.lark.evidenceListedInAPI is off)")
		return
	}
	q := r.URL.Query()
	limit := DefaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			writeError(w, http.StatusBadRequest, codeInvalidLimit, fmt.Sprintf("limit must be an integer from 1 to %d", MaxPageSize))
			return
		}
		limit = n
	}
	kind := store.LarkMessageEvidence
	var after *store.Cursor
	cursor, since := q.Get("cursor"), q.Get("since")
	switch {
	case cursor != "" && since != "":
		writeError(w, http.StatusBadRequest, codeInvalidSince, "since and cursor cannot be combined: the cursor already holds the position")
		return
	case cursor != "":
		cur, err := s.cursors.decode(c.ws(), kind, cursor)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidCursor, "the cursor is not one this API issued for this workspace; start again without it")
			return
		}
		after = &cur
	case since != "":
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidSince, "since must be an RFC 3339 time, such as 2026-03-01T10:00:00Z")
			return
		}
		// (occurred_at, id) > (since, 0) holds for every row at or after since: ids start at 1.
		after = &store.Cursor{OccurredAt: t.UTC().Truncate(time.Microsecond), ID: 0}
	}
	page, err := s.store.ListEvidence(c.ctx, c.ws(), kind, after, limit)
	if err != nil {
		s.storeFailure(w, r, "list evidence", err, slog.String("workspace", string(c.ws())))
		return
	}
	out := evidencePageJSON{Items: make([]evidenceJSON, len(page.Items))}
	for i := range page.Items {
		out.Items[i] = toEvidenceJSON(&page.Items[i])
	}
	if page.Next != nil {
		out.NextCursor = s.cursors.encode(c.ws(), kind, *page.Next)
	}
	writeJSON(w, http.StatusOK, out)
}

// ---- timeline ----

type workspaceJSON struct {
	ID        ids.WorkspaceID `json:"id"`
	Type      string          `json:"type"`
	Status    string          `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
}

type entryJSON struct {
	ID            int64      `json:"id"`
	OccurredAt    time.Time  `json:"occurred_at"`
	Kind          string     `json:"kind"`
	Title         string     `json:"title"`
	Body          string     `json:"body"`
	Status        string     `json:"status"`
	Source        string     `json:"source"`
	HumanEdited   bool       `json:"human_edited"`
	HumanEditedAt *time.Time `json:"human_edited_at,omitempty"`
	// NeedsReview: a message the entry cites was recalled; the entry is a person's (or
	// curated), so its text was kept, and a person should look at it. An edit clears it.
	NeedsReview   bool       `json:"needs_review"`
	NeedsReviewAt *time.Time `json:"needs_review_at,omitempty"`
	// Withdrawn: an AI draft nobody had touched that cited a recalled message; it is
	// hidden and its title and body are empty (decisions D12).
	Withdrawn   bool       `json:"withdrawn"`
	WithdrawnAt *time.Time `json:"withdrawn_at,omitempty"`
	UpdatedAt   time.Time  `json:"updated_at"`
	EvidenceIDs []int64    `json:"evidence_ids"`
}

type timelineJSON struct {
	Workspace workspaceJSON `json:"workspace"`
	// EvidenceListed tells clients whether the evidence endpoint lists messages.
	EvidenceListed bool        `json:"evidence_listed"`
	Entries        []entryJSON `json:"entries"`
}

func toEntryJSON(e *store.Entry) entryJSON {
	ev := e.EvidenceIDs
	if ev == nil {
		ev = []int64{}
	}
	return entryJSON{
		ID: e.ID, OccurredAt: e.OccurredAt.UTC(), Kind: e.Kind, Title: e.Title, Body: e.Body,
		Status: string(e.Status), Source: string(e.Source), HumanEdited: e.HumanEditedAt != nil,
		HumanEditedAt: e.HumanEditedAt, NeedsReview: e.NeedsReviewAt != nil, NeedsReviewAt: e.NeedsReviewAt,
		Withdrawn: e.WithdrawnAt != nil, WithdrawnAt: e.WithdrawnAt, UpdatedAt: e.UpdatedAt.UTC(), EvidenceIDs: ev,
	}
}

func (s *Server) getTimeline(w http.ResponseWriter, r *http.Request, c *call) {
	entries, err := s.store.ListVisibleEntries(c.ctx, c.ws())
	if err != nil {
		s.storeFailure(w, r, "list visible entries", err, slog.String("workspace", string(c.ws())))
		return
	}
	out := timelineJSON{
		Workspace: workspaceJSON{
			ID: c.workspace.ID, Type: c.workspace.Type, Status: string(c.workspace.Status),
			CreatedAt: c.workspace.CreatedAt.UTC(),
		},
		EvidenceListed: s.evidenceListed,
		Entries:        make([]entryJSON, len(entries)),
	}
	for i := range entries {
		out.Entries[i] = toEntryJSON(&entries[i])
	}
	writeJSON(w, http.StatusOK, out)
}

// entryPatchJSON is the body of PATCH …/timeline/{entry}. Absent (or null) fields are
// left as they are; at least one must be given.
type entryPatchJSON struct {
	Status     *string `json:"status"`
	Kind       *string `json:"kind"`
	Title      *string `json:"title"`
	Body       *string `json:"body"`
	OccurredAt *string `json:"occurred_at"`
}

// kindRE accepts the synthesizers' kinds (impact, root_cause, …) and any other
// lower-case snake_case kind a person chooses.
var kindRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// fieldError is a rejected request field; its text is safe to return and to log.
type fieldError struct{ field, problem string }

func (e *fieldError) Error() string { return e.field + ": " + e.problem }

func checkField(field, v string, max int, required bool) error {
	switch {
	case required && strings.TrimSpace(v) == "":
		return &fieldError{field, "must not be blank"}
	case len(v) > max:
		return &fieldError{field, fmt.Sprintf("is %d bytes, at most %d are allowed", len(v), max)}
	case strings.IndexByte(v, 0) >= 0:
		return &fieldError{field, "must not contain NUL characters"}
	}
	return nil
}

// toPatch validates the body and returns the store patch and the names of the fields
// it changes (for the audit log).
func (p *entryPatchJSON) toPatch() (store.EntryPatch, []string, error) {
	var (
		out    store.EntryPatch
		fields []string
	)
	if p.Status != nil {
		st := store.EntryStatus(*p.Status)
		switch st {
		case store.EntryStatusDraft, store.EntryStatusConfirmed, store.EntryStatusHidden:
		default:
			return out, nil, &fieldError{"status", "must be one of draft, confirmed, hidden"}
		}
		out.Status, fields = &st, append(fields, "status")
	}
	if p.Kind != nil {
		if !kindRE.MatchString(*p.Kind) {
			return out, nil, &fieldError{"kind", "must be lower-case snake_case (a-z, 0-9, _), starting with a letter, at most 64 bytes"}
		}
		out.Kind, fields = p.Kind, append(fields, "kind")
	}
	if p.Title != nil {
		t := strings.TrimSpace(*p.Title)
		if err := checkField("title", t, store.MaxEntryTitleBytes, true); err != nil {
			return out, nil, err
		}
		out.Title, fields = &t, append(fields, "title")
	}
	if p.Body != nil {
		if err := checkField("body", *p.Body, store.MaxEntryBodyBytes, false); err != nil {
			return out, nil, err
		}
		out.Body, fields = p.Body, append(fields, "body")
	}
	if p.OccurredAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *p.OccurredAt)
		if err != nil || t.Year() < 1970 {
			return out, nil, &fieldError{"occurred_at", "must be an RFC 3339 time after 1970, such as 2026-03-01T10:00:00Z"}
		}
		t = t.UTC()
		out.OccurredAt, fields = &t, append(fields, "occurred_at")
	}
	if len(fields) == 0 {
		return out, nil, errEmptyPatch
	}
	return out, fields, nil
}

var errEmptyPatch = errors.New("the patch changes nothing: give at least one of status, kind, title, body, occurred_at")

// patchEntry applies a person's edit: confirm, hide (or show again), retitle, reword,
// reclassify or move an entry. The entry becomes human-edited, so synthesis never
// changes its text again (store.HumanEditEntry).
func (s *Server) patchEntry(w http.ResponseWriter, r *http.Request, c *call) {
	id, err := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if err != nil || id < 1 {
		writeError(w, http.StatusBadRequest, codeInvalidEntryID, "the entry id must be a positive integer")
		return
	}
	var body entryPatchJSON
	if !decodeBody(w, r, &body) {
		return
	}
	patch, fields, err := body.toPatch()
	if errors.Is(err, errEmptyPatch) {
		writeError(w, http.StatusBadRequest, codeEmptyPatch, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidField, err.Error())
		return
	}
	e, err := s.store.HumanEditEntry(c.ctx, c.ws(), id, patch)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeEntryNotFound, "no such entry in this workspace")
		return
	case errors.Is(err, store.ErrInvalid):
		// The checks above mirror the store's; this is a bound they missed.
		writeError(w, http.StatusBadRequest, codeInvalidField, "the store rejected the edit: "+err.Error())
		return
	case err != nil:
		s.storeFailure(w, r, "human edit entry", err, slog.String("workspace", string(c.ws())), slog.Int64("entry", id))
		return
	}
	s.log.LogAttrs(c.ctx, slog.LevelInfo, "timeline entry edited by a person",
		slog.String("workspace", string(c.ws())), slog.Int64("entry", id),
		slog.String("token", c.token), slog.Any("fields", fields), slog.String("status", string(e.Status)))
	writeJSON(w, http.StatusOK, toEntryJSON(&e))
}

// ---- summary ----

type summaryJSON struct {
	WorkspaceID ids.WorkspaceID `json:"workspace_id"`
	Source      string          `json:"source"`
	Text        string          `json:"text"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// RefreshDue: a recall withdrew an AI draft; the AI summary's text was emptied with
	// it and the next completed window writes a new one.
	RefreshDue bool `json:"refresh_due"`
}

type summaryPutJSON struct {
	Text *string `json:"text"`
}

func (s *Server) getSummary(w http.ResponseWriter, r *http.Request, c *call) {
	s.answerSummary(w, r, c)
}

func (s *Server) answerSummary(w http.ResponseWriter, r *http.Request, c *call) {
	sum, err := s.store.GetSummary(c.ctx, c.ws())
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, codeSummaryNotFound, "the workspace has no summary yet")
		return
	}
	if err != nil {
		s.storeFailure(w, r, "get summary", err, slog.String("workspace", string(c.ws())))
		return
	}
	writeJSON(w, http.StatusOK, summaryJSON{
		WorkspaceID: c.ws(), Source: string(sum.Source), Text: sum.Text, UpdatedAt: sum.UpdatedAt.UTC(),
		RefreshDue: sum.RefreshDueAt != nil,
	})
}

// putSummary stores a person's summary (source=human); automatic summaries never
// overwrite it afterwards (design §13). The answer is the stored summary.
func (s *Server) putSummary(w http.ResponseWriter, r *http.Request, c *call) {
	var body summaryPutJSON
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Text == nil {
		writeError(w, http.StatusBadRequest, codeInvalidField, "text: is required (an empty string clears the summary and keeps it human-owned)")
		return
	}
	if err := checkField("text", *body.Text, store.MaxSummaryBytes, false); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidField, err.Error())
		return
	}
	err := s.store.PutHumanSummary(c.ctx, c.ws(), *body.Text)
	if errors.Is(err, store.ErrInvalid) {
		writeError(w, http.StatusBadRequest, codeInvalidField, "the store rejected the summary: "+err.Error())
		return
	}
	if err != nil {
		s.storeFailure(w, r, "put human summary", err, slog.String("workspace", string(c.ws())))
		return
	}
	size := len(*body.Text) // the size only: logs never carry the text
	s.log.LogAttrs(c.ctx, slog.LevelInfo, "summary written by a person",
		slog.String("workspace", string(c.ws())), slog.String("token_name", c.token), slog.Int("bytes", size))
	s.answerSummary(w, r, c)
}

// compareEntryJSON is one side of an entry difference in the compare answer.
type compareEntryJSON struct {
	ID          int64     `json:"id"`
	Fingerprint string    `json:"fingerprint"`
	OccurredAt  time.Time `json:"occurred_at"`
	Kind        string    `json:"kind"`
	Status      string    `json:"status"`
	Title       string    `json:"title"`
	Body        string    `json:"body"`
}

type comparePairJSON struct {
	Serving compareEntryJSON `json:"serving"`
	Version compareEntryJSON `json:"version"`
}

type compareJSON struct {
	WorkspaceID        ids.WorkspaceID    `json:"workspace_id"`
	Serving            string             `json:"serving"`
	Version            string             `json:"version"`
	OnlyServing        []compareEntryJSON `json:"only_serving"`
	OnlyVersion        []compareEntryJSON `json:"only_version"`
	Changed            []comparePairJSON  `json:"changed"`
	SummaryChanged     bool               `json:"summary_changed"`
	WindowsOnlyServing int                `json:"windows_only_serving"`
	WindowsOnlyVersion int                `json:"windows_only_version"`
}

func toCompareEntry(e store.DiffEntry) compareEntryJSON {
	return compareEntryJSON{ID: e.ID, Fingerprint: e.Fingerprint, OccurredAt: e.OccurredAt.UTC(), Kind: e.Kind,
		Status: string(e.Status), Title: e.Title, Body: e.Body}
}

// getCompare answers what processor version ?version= wrote differently from the
// serving one for the workspace (store.DiffVersions): the page's ?compare=B.
func (s *Server) getCompare(w http.ResponseWriter, r *http.Request, c *call) {
	version := r.URL.Query().Get("version")
	if _, err := ids.ParseProcessorVersion(version); err != nil {
		writeError(w, http.StatusBadRequest, codeInvalidVersion, "version must name a processor version, e.g. ?version=v2")
		return
	}
	if _, err := s.store.GetVersion(c.ctx, version); errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, codeVersionNotFound, "no processor version "+version)
		return
	} else if err != nil {
		s.storeFailure(w, r, "get processor version", err)
		return
	}
	serving, err := s.store.ServingVersion(c.ctx)
	if err != nil {
		s.storeFailure(w, r, "get the serving processor version", err)
		return
	}
	diffs, err := s.store.DiffVersions(c.ctx, serving, version, c.ws())
	if err != nil {
		s.storeFailure(w, r, "diff processor versions", err, slog.String("workspace", string(c.ws())))
		return
	}
	out := compareJSON{WorkspaceID: c.ws(), Serving: serving, Version: version,
		OnlyServing: []compareEntryJSON{}, OnlyVersion: []compareEntryJSON{}, Changed: []comparePairJSON{}}
	for _, d := range diffs {
		if d.Workspace != c.ws() {
			continue
		}
		for _, e := range d.OnlyA {
			out.OnlyServing = append(out.OnlyServing, toCompareEntry(e))
		}
		for _, e := range d.OnlyB {
			out.OnlyVersion = append(out.OnlyVersion, toCompareEntry(e))
		}
		for _, p := range d.Changed {
			out.Changed = append(out.Changed, comparePairJSON{Serving: toCompareEntry(p[0]), Version: toCompareEntry(p[1])})
		}
		out.SummaryChanged = d.SummaryChanged
		out.WindowsOnlyServing, out.WindowsOnlyVersion = len(d.WindowsOnlyA), len(d.WindowsOnlyB)
	}
	writeJSON(w, http.StatusOK, out)
}
