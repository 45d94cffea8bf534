package retention

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/teststore"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const testRetention = 720 * time.Hour

// env is one test's database, topics and clock.
type env struct {
	pool    *pgxpool.Pool
	st      *store.Store
	brokers []string
	evTopic string
	cpTopic string
	codecs  *schemas.Codecs
	now     time.Time
	cutoff  time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := teststore.Open(t, teststore.MaxConns(6))
	pool, st := db.Pool, db.Store
	var err error
	compact := "compact"
	cfg := map[string]*string{"cleanup.policy": &compact}
	e := &env{
		pool:    pool,
		st:      st,
		brokers: testenv.KafkaBrokers(t),
		evTopic: testenv.NewTopic(t, 3, cfg),
		cpTopic: testenv.NewTopic(t, 3, cfg),
		now:     time.Now().UTC().Truncate(time.Microsecond),
	}
	e.cutoff = e.now.Add(-testRetention)
	e.codecs, err = schemas.NewCodecs(schemas.Topics{Evidence: e.evTopic, Checkpoint: e.cpTopic})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// job builds a Job on e with a fixed clock and a registry of its own.
func (e *env) job(t *testing.T, mode Mode, mutate func(*Options)) (*Job, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := Options{
		Kafka:           kafka.Options{Brokers: e.brokers, ClientID: "larkline-retention-test"},
		EvidenceTopic:   e.evTopic,
		CheckpointTopic: e.cpTopic,
		Pool:            e.pool,
		Codecs:          e.codecs,
		Retention:       testRetention,
		Mode:            mode,
		BatchSize:       3, // several batches per workspace
		Clock:           func() time.Time { return e.now },
		Registry:        reg,
	}
	if mutate != nil {
		mutate(&o)
	}
	j, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	return j, reg
}

// message is one seeded Lark message.
type message struct {
	ws       ids.WorkspaceID
	chat     ids.ChatID
	msg      ids.MessageID
	at       time.Time
	kind     string // text, image, file, recalled
	name     string // actor display name
	due      bool
	id       int64 // evidence id once stored
	original store.Evidence
}

var normalizer = func() *normalize.Normalizer {
	n, err := normalize.New(normalize.Options{SelfAppID: "cli_larkline_test"})
	if err != nil {
		panic(err)
	}
	return n
}()

// evidenceOf normalizes a realistic Lark message and maps it to a row as the event
// path and the sink do.
func evidenceOf(t *testing.T, m message) store.Evidence {
	t.Helper()
	in := normalize.Input{
		MessageID: string(m.msg), ChatID: string(m.chat), ChatType: normalize.ChatTypeGroup,
		SenderID: "ou_" + string(m.msg[3:]), SenderType: normalize.SenderUser, CreateTime: m.at,
	}
	switch m.kind {
	case "text":
		in.MessageType, in.Content = "text", `{"text":"@_user_1 db-3 disk is full, failing over"}`
		in.Mentions = []normalize.Mention{{Key: "@_user_1", OpenID: "ou_oncall", Name: "On Call"}}
	case "image":
		in.MessageType, in.Content = "image", `{"image_key":"img_v2_0123456789"}`
	case "file":
		in.MessageType, in.Content = "file", `{"file_key":"file_v2_0123456789","file_name":"postmortem-draft.pdf"}`
	case "recalled", "looks":
		in.MessageType, in.Content, in.Deleted = "text", `{"text":"wrong channel"}`, true
	default:
		t.Fatalf("unknown kind %q", m.kind)
	}
	n, err := normalizer.Normalize(in)
	if err != nil {
		t.Fatalf("normalize %s: %v", m.msg, err)
	}
	meta, err := json.Marshal(n.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if m.kind == "looks" {
		// Deleted, no text, only the kept metadata keys: it looks redacted, but its
		// hash is not a redaction's (issue #29).
		n.ContentHash = fmt.Sprintf("%x", sha256.Sum256([]byte("not a redaction "+string(m.msg))))
	}
	return store.Evidence{
		WorkspaceID: m.ws, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey: ids.MessageSourceKey(m.chat, m.msg), OccurredAt: n.CreatedAt, SourceUpdatedAt: n.UpdatedAt,
		ObservedAt: m.at.Add(time.Second), ActorID: n.SenderOpenID, ActorDisplayName: m.name,
		Content: n.Text, ContentHash: n.ContentHash, Metadata: meta, Deleted: n.Deleted,
		SynthesisEligible: n.SynthesisEligible,
	}
}

// fixture is the seeded world: what is due and what must survive.
type fixture struct {
	messages     []*message
	other        int64   // evidence id of a non-Lark row (old)
	checkpoints  []int64 // sync-state ids of checkpoints that must go
	keptStates   []int64 // sync-state ids that must stay (checkpoints, windows, other)
	windowsDue   []int64 // sync-state ids of window states that must go
	goneCPKeys   []string
	humanEntry   int64
	aiEntry      int64
	dueBound     []int64 // due evidence ids bound to entries
	keptBound    []int64 // surviving evidence ids bound to entries
	alreadyClean *message
	looks        *message // looks redacted, is not (its hash)
	editedEntry  int64    // an AI draft a person edited, bound to due evidence
}

func (f *fixture) due() []*message {
	var out []*message
	for _, m := range f.messages {
		if m.due {
			out = append(out, m)
		}
	}
	return out
}

// seed builds the world of the retention tests. Workspaces:
//
//	ws-a  due and surviving evidence (boundary rows on both sides of the cutoff), a
//	      stale checkpoint (kept: the workspace has recent evidence), window states
//	      old and recent, entries bound to due and surviving evidence;
//	ws-b  only old evidence and two stale checkpoints: aged out;
//	ws-c  only old evidence, but a checkpoint reconciliation wrote recently: kept;
//	ws-d  old evidence of another source: never touched;
//	ws-e  a stale checkpoint and no evidence at all: aged out.
func (e *env) seed(t *testing.T) *fixture {
	t.Helper()
	ctx := testenv.Context(t, time.Minute)
	f := &fixture{}
	add := func(ws, chat, msg string, at time.Time, kind, name string, due bool) *message {
		m := &message{ws: ids.WorkspaceID(ws), chat: ids.ChatID(chat), msg: ids.MessageID(msg), at: at, kind: kind, name: name, due: due}
		f.messages = append(f.messages, m)
		return m
	}
	c := e.cutoff
	kinds := []string{"text", "image", "file"}
	for i := range 7 {
		add("ws-a", "oc_a1", fmt.Sprintf("om_a_old_%d", i), c.Add(-time.Hour-time.Duration(i)*time.Minute), kinds[i%3], "Alice", true)
	}
	add("ws-a", "oc_a1", "om_a_edge_before", c.Add(-time.Microsecond), "text", "Bob", true)
	f.alreadyClean = add("ws-a", "oc_a1", "om_a_recalled", c.Add(-2*time.Hour), "recalled", "", true)
	f.looks = add("ws-a", "oc_a1", "om_a_looks", c.Add(-3*time.Hour), "looks", "", true)
	add("ws-a", "oc_a1", "om_a_edge_at", c, "text", "Bob", false)
	add("ws-a", "oc_a1", "om_a_edge_after", c.Add(time.Microsecond), "image", "Bob", false)
	add("ws-a", "oc_a2", "om_a_recent", e.now.Add(-time.Hour), "file", "Carol", false)
	add("ws-b", "oc_b1", "om_b_1", c.Add(-48*time.Hour), "text", "Dan", true)
	add("ws-b", "oc_b2", "om_b_2", c.Add(-47*time.Hour), "image", "Dan", true)
	add("ws-c", "oc_c1", "om_c_1", c.Add(-10*time.Hour), "text", "Eve", true)

	batch := make([]store.Evidence, len(f.messages))
	for i, m := range f.messages {
		batch[i] = evidenceOf(t, *m)
	}
	other := store.Evidence{WorkspaceID: "ws-d", Source: "jira", SourceType: "jira_issue", SourceKey: "issue/OPS-1",
		OccurredAt: c.Add(-100 * time.Hour), Content: "an issue comment", ContentHash: "h-jira-1", Metadata: json.RawMessage(`{"k":"v"}`), SynthesisEligible: true}
	batch = append(batch, other)
	outs, err := e.st.UpsertEvidence(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range f.messages {
		m.id = outs[i].ID
		m.original = batch[i]
	}
	f.other = outs[len(outs)-1].ID

	// Checkpoints: AdvanceCheckpoint writes them as reconciliation does; then their
	// updated_at is set to when they last changed.
	cp := func(ws, chat string, pos time.Time, updated time.Time) int64 {
		got, _, err := e.st.AdvanceCheckpoint(ctx, ids.WorkspaceID(ws), ids.ChatID(chat), store.CheckpointPosition{Time: pos}, store.CheckpointMeta{ReconcileVersion: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `UPDATE workspace_timeline_sync_states SET updated_at = $2, created_at = $2 WHERE id = $1`, got.ID, updated); err != nil {
			t.Fatal(err)
		}
		return got.ID
	}
	f.keptStates = append(f.keptStates, cp("ws-a", "oc_a1", c.Add(-time.Hour), c.Add(-time.Hour)))
	f.checkpoints = append(f.checkpoints,
		cp("ws-b", "oc_b1", c.Add(-40*time.Hour), c.Add(-30*time.Hour)),
		cp("ws-b", "oc_b2", c.Add(-40*time.Hour), c.Add(-time.Microsecond)),
		cp("ws-e", "oc_e1", c.Add(-90*time.Hour), c.Add(-80*time.Hour)))
	f.goneCPKeys = []string{"ws-b/oc_b1", "ws-b/oc_b2", "ws-e/oc_e1"}
	f.keptStates = append(f.keptStates, cp("ws-c", "oc_c1", c.Add(-10*time.Hour), e.now.Add(-10*time.Minute)))

	// Window states and an unrelated system sync state, written directly.
	state := func(ws, source, typ, key string, updated time.Time) int64 {
		var id int64
		err := e.pool.QueryRow(ctx, `INSERT INTO workspace_timeline_sync_states
				(workspace_id, source, source_type, source_key, status, metadata_json, created_at, updated_at)
			VALUES ($1, $2, $3, $4, CASE WHEN $3 = 'lark_timeline_window' THEN 'completed' END, '{}', $5, $5) RETURNING id`,
			ws, source, typ, key, updated).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	start := ids.WindowStart(c.Add(-2*time.Hour), 10*time.Minute)
	f.windowsDue = append(f.windowsDue,
		state("ws-a", ids.SourceSystem, ids.SourceTypeLarkWindow, ids.WindowSourceKey("oc_a1", "", start), c.Add(-time.Hour)),
		state("ws-a", ids.SourceSystem, ids.SourceTypeLarkWindow, ids.WindowSourceKey("oc_a1", "v2", start), c.Add(-time.Microsecond)))
	f.keptStates = append(f.keptStates,
		state("ws-a", ids.SourceSystem, ids.SourceTypeLarkWindow, ids.WindowSourceKey("oc_a1", "", start.Add(10*time.Minute)), c),
		state("ws-a", ids.SourceSystem, ids.SourceTypeLarkWindow, ids.WindowSourceKey("oc_a2", "", ids.WindowStart(e.now, 10*time.Minute)), e.now),
		state("ws-d", ids.SourceSystem, "ai_timeline_synthesis", "evidence/1", c.Add(-100*time.Hour)))

	// Entries: a human one bound to due and surviving evidence, an AI draft bound to
	// due evidence.
	byMsg := func(id string) *message {
		for _, m := range f.messages {
			if string(m.msg) == id {
				return m
			}
		}
		t.Fatalf("no message %s", id)
		return nil
	}
	due0, due1, kept := byMsg("om_a_old_0").id, byMsg("om_a_old_1").id, byMsg("om_a_edge_at").id
	h, err := e.st.CreateHumanEntry(ctx, store.HumanEntry{Workspace: "ws-a", OccurredAt: c.Add(-time.Hour), Kind: "action",
		Title: "Failed over db-3", EvidenceIDs: []int64{due0, kept}})
	if err != nil {
		t.Fatal(err)
	}
	ai, err := e.st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: "ws-a", Fingerprint: "fp-1", EntryContent: store.EntryContent{
		OccurredAt: c.Add(-time.Hour), Kind: "detection", Title: "Disk full on db-3", EvidenceIDs: []int64{due0, due1}}})
	if err != nil {
		t.Fatal(err)
	}
	edited, err := e.st.UpsertDraftEntry(ctx, store.EntryDraft{Workspace: "ws-a", Fingerprint: "fp-2", EntryContent: store.EntryContent{
		OccurredAt: c.Add(-time.Hour), Kind: "mitigation", Title: "Failed over", EvidenceIDs: []int64{due1}}})
	if err != nil {
		t.Fatal(err)
	}
	title := "Failed over to db-4 (checked by a person)"
	if _, err := e.st.HumanEditEntry(ctx, "ws-a", edited.ID, store.EntryPatch{Title: &title}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PutAISummaryIfNotHuman(ctx, "ws-a", "db-3 disk was full; failed over", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	f.humanEntry, f.aiEntry, f.editedEntry = h.ID, ai.ID, edited.ID
	f.dueBound, f.keptBound = []int64{due0, due1}, []int64{kept}
	return f
}

// dbState is every row of the tables retention may touch, as JSON text by id.
type dbState struct {
	evidence map[int64]string
	states   map[int64]string
	entries  map[int64]string
	bindings map[[2]int64]bool
}

func (e *env) snapshot(t *testing.T) dbState {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	rowsByID := func(table string) map[int64]string {
		rows, err := e.pool.Query(ctx, `SELECT id, row_to_json(t)::text FROM `+table+` t`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]string{}
		var (
			id  int64
			row string
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &row}, func() error { out[id] = row; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	s := dbState{
		evidence: rowsByID("workspace_timeline_evidence"),
		states:   rowsByID("workspace_timeline_sync_states"),
		entries:  rowsByID("workspace_timeline_entries"),
		bindings: map[[2]int64]bool{},
	}
	rows, err := e.pool.Query(ctx, `SELECT entry_id, evidence_id FROM workspace_timeline_entry_evidence`)
	if err != nil {
		t.Fatal(err)
	}
	var a, b int64
	if _, err := pgx.ForEachRow(rows, []any{&a, &b}, func() error { s.bindings[[2]int64{a, b}] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	return s
}

func equalState(t *testing.T, what string, got, want dbState) {
	t.Helper()
	if !maps.Equal(got.evidence, want.evidence) || !maps.Equal(got.states, want.states) ||
		!maps.Equal(got.entries, want.entries) || !maps.Equal(got.bindings, want.bindings) {
		t.Fatalf("%s: database changed\n got %+v\nwant %+v", what, got, want)
	}
}

// counter reads the series of name with label=value (label "": the only series).
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	labels := map[string]string{}
	if label != "" {
		labels[label] = value
	}
	v, ok := testenv.MetricValue(t, reg, name, labels)
	if !ok {
		t.Fatalf("metric %s{%s=%q} not found", name, label, value)
	}
	return v
}

// plain returns r with its cutoff checked against want and cleared, and its duration
// cleared, so that reports compare with ==.
func plain(t *testing.T, r Report, cutoff time.Time) Report {
	t.Helper()
	if !r.Cutoff.Equal(cutoff) {
		t.Fatalf("report cutoff %v, want %v", r.Cutoff, cutoff)
	}
	r.Cutoff, r.Duration = time.Time{}, 0
	return r
}

func kgoRecord(topic, key string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
}
