package retention

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// expectedAfter is the database a correct run leaves: due rows redacted or gone,
// aged-out checkpoints and stale windows gone, everything else as it was.
func checkAfterRun(t *testing.T, e *env, f *fixture, mode Mode, before, after dbState) {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	dueIDs := map[int64]bool{}
	for _, m := range f.due() {
		dueIDs[m.id] = true
	}
	// Evidence: every row not due is byte-for-byte what it was.
	for id, row := range before.evidence {
		if dueIDs[id] {
			continue
		}
		if after.evidence[id] != row {
			t.Errorf("evidence %d changed although not due:\n was %s\n now %s", id, row, after.evidence[id])
		}
	}
	if _, ok := after.evidence[f.other]; !ok {
		t.Errorf("evidence of another source (%d) was removed", f.other)
	}
	switch mode {
	case ModeDelete:
		for id := range dueIDs {
			if _, ok := after.evidence[id]; ok {
				t.Errorf("due evidence %d still present in delete mode", id)
			}
		}
	case ModeRedact:
		for _, m := range f.due() {
			if _, ok := after.evidence[m.id]; !ok {
				t.Fatalf("due evidence %d deleted in redact mode", m.id)
			}
			got, err := e.st.EvidenceByKeys(ctx, m.ws, store.LarkMessageEvidence, []string{m.original.SourceKey})
			if err != nil || len(got) != 1 {
				t.Fatalf("reading evidence %d: %v, %d rows", m.id, err, len(got))
			}
			checkRedacted(t, m, got[0], e.now)
		}
		// A recall's redaction merely looks like retention's: it is redacted again
		// (issue #29), and so is a deleted row whose hash is not a redaction's.
		for _, m := range []*message{f.alreadyClean, f.looks} {
			if after.evidence[m.id] == before.evidence[m.id] {
				t.Errorf("a row that merely looks redacted (%s) was skipped", m.msg)
			}
		}
	}
	// Sync states: exactly the aged-out checkpoints and stale windows are gone.
	gone := append(slices.Clone(f.checkpoints), f.windowsDue...)
	for id, row := range before.states {
		switch {
		case slices.Contains(gone, id):
			if _, ok := after.states[id]; ok {
				t.Errorf("sync state %d should have been removed: %s", id, row)
			}
		case after.states[id] != row:
			t.Errorf("sync state %d changed: was %s, now %s", id, row, after.states[id])
		}
	}
	for _, id := range f.keptStates {
		if _, ok := after.states[id]; !ok {
			t.Errorf("sync state %d removed but must stay", id)
		}
	}
	// Entries: the AI draft nobody touched that cites due evidence is withdrawn (no
	// text left) and the AI summary emptied and due for a refresh (issue #29); the
	// human entry and the AI entry a person edited are theirs: unchanged. Bindings to
	// deleted evidence go with it.
	for id, row := range before.entries {
		if id != f.aiEntry && after.entries[id] != row {
			t.Errorf("entry %d changed:\n was %s\n now %s", id, row, after.entries[id])
		}
	}
	if e, err := e.st.GetEntry(ctx, "ws-a", f.aiEntry); err != nil || e.Status != store.EntryStatusHidden || e.Title != "" || e.Body != "" || e.WithdrawnAt == nil {
		t.Errorf("AI draft of due evidence after the run: %+v %v", e, err)
	}
	if sum, err := e.st.GetSummary(ctx, "ws-a"); err != nil || sum.Text != "" || sum.RefreshDueAt == nil {
		t.Errorf("AI summary after the run: %+v %v", sum, err)
	}
	for b := range before.bindings {
		_, stays := after.bindings[b]
		if mode == ModeDelete && dueIDs[b[1]] {
			if stays {
				t.Errorf("binding %v to deleted evidence remains", b)
			}
			continue
		}
		if !stays {
			t.Errorf("binding %v removed", b)
		}
	}
	if len(after.bindings) > len(before.bindings) {
		t.Errorf("bindings added: %v", after.bindings)
	}
}

// checkRedacted checks one row against the recall redaction of its message.
func checkRedacted(t *testing.T, m *message, got store.Evidence, now time.Time) {
	t.Helper()
	var md map[string]any
	if err := json.Unmarshal(m.original.Metadata, &md); err != nil {
		t.Fatal(err)
	}
	mt, _ := md[schemas.MetaMessageType].(string)
	want := normalize.Redact(normalize.Message{MessageType: mt, Metadata: md}, time.Time{})
	// Retention marks its own redactions, a recalled row's too (issue #29).
	want.Metadata[schemas.MetaRetention] = true
	wantMeta, _ := json.Marshal(want.Metadata)
	switch {
	case got.Content != "" || !got.Deleted || got.SynthesisEligible || got.ActorDisplayName != "":
		t.Errorf("evidence %d not redacted: content %q deleted %v eligible %v name %q", m.id, got.Content, got.Deleted, got.SynthesisEligible, got.ActorDisplayName)
	case got.ContentHash != want.ContentHash:
		t.Errorf("evidence %d hash %s, want the redaction hash %s", m.id, got.ContentHash, want.ContentHash)
	case m.kind != "recalled" && got.ContentHash == m.original.ContentHash:
		t.Errorf("evidence %d kept its content hash", m.id)
	case !jsonEqual(got.Metadata, wantMeta):
		t.Errorf("evidence %d metadata %s, want %s", m.id, got.Metadata, wantMeta)
	case !got.OccurredAt.Equal(m.original.OccurredAt) || got.ActorID != m.original.ActorID:
		t.Errorf("evidence %d lost its time or actor id", m.id)
	}
	for _, k := range []string{schemas.MetaImageKey, schemas.MetaFileKey, schemas.MetaFileName, schemas.MetaMentionOpenIDs} {
		if strings.Contains(string(got.Metadata), `"`+k+`"`) {
			t.Errorf("evidence %d metadata keeps %s: %s", m.id, k, got.Metadata)
		}
	}
	if !got.ObservedAt.Equal(now.Truncate(time.Millisecond)) {
		t.Errorf("evidence %d observed_at %v, want the run's %v", m.id, got.ObservedAt, now.Truncate(time.Millisecond))
	}
}

// modeRun is one run of the job over a freshly seeded environment.
type modeRun struct {
	e     *env
	f     *fixture
	j     *Job
	reg   *prometheus.Registry
	ctx   context.Context
	after dbState
	due   int // evidence rows due for retention
}

// runMode seeds an environment, runs the job once in mode, and checks what every
// mode leaves behind (checkAfterRun) and the run's report.
func runMode(t *testing.T, mode Mode) modeRun {
	t.Helper()
	r := modeRun{e: newEnv(t), ctx: testenv.Context(t, 2*time.Minute)}
	r.f = r.e.seed(t)
	r.j, r.reg = r.e.job(t, mode, nil)
	before := r.e.snapshot(t)
	rep, err := r.j.RunOnce(r.ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	r.after = r.e.snapshot(t)
	checkAfterRun(t, r.e, r.f, mode, before, r.after)

	r.due = len(r.f.due())
	want := Report{Mode: mode, Cutoff: r.e.cutoff, CheckpointsRemoved: 3, AgedOutWorkspaces: 2,
		WindowsRemoved: 2, Published: int64(r.due + 3), Complete: true}
	if mode == ModeRedact {
		want.Redacted = int64(r.due)
	} else {
		want.Deleted = int64(r.due)
	}
	if got := plain(t, rep, r.e.cutoff); got != plain(t, want, r.e.cutoff) {
		t.Fatalf("report %+v\n want %+v", got, want)
	}
	return r
}

func TestRedactMode(t *testing.T) {
	r := runMode(t, ModeRedact)
	e, f, j, reg, ctx, after, due := r.e, r.f, r.j, r.reg, r.ctx, r.after, r.due

	// The evidence topic holds one redacted version per redacted row, equal to the row.
	recs := testenv.ReadTopic(t, e.evTopic)
	if len(recs) != due {
		t.Fatalf("%d records on the evidence topic, want %d", len(recs), due)
	}
	byKey := map[string]schemas.EvidenceRecord{}
	for _, r := range recs {
		if r.Value == nil {
			t.Fatalf("tombstone for %s in redact mode", r.Key)
		}
		v, err := e.codecs.Evidence.Decode(ctx, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if v.Key() != string(r.Key) {
			t.Fatalf("record key %s holds %s", r.Key, v.Key())
		}
		byKey[string(r.Key)] = v
	}
	for _, m := range f.due() {
		v, ok := byKey[ids.EvidenceKey(m.ws, m.chat, m.msg)]
		if !ok {
			t.Fatalf("no redacted version of %s on the topic", m.msg)
		}
		got, err := e.st.EvidenceByKeys(ctx, m.ws, store.LarkMessageEvidence, []string{m.original.SourceKey})
		if err != nil {
			t.Fatal(err)
		}
		row := got[0]
		if !v.Deleted || v.Content != "" || v.SynthesisEligible || v.ContentHash != row.ContentHash ||
			!jsonEqual([]byte(v.MetadataJSON), row.Metadata) || v.IneligibleReason != schemas.IneligibleDeleted ||
			v.ActorDisplayName != "" || !v.OccurredAt.Equal(m.original.OccurredAt.Truncate(time.Millisecond)) {
			t.Errorf("record of %s = %+v, does not match the redacted row %+v", m.msg, v, row)
		}
	}
	// The checkpoint topic holds a tombstone per removed checkpoint, in its chat's
	// partition.
	cps := testenv.ReadTopic(t, e.cpTopic)
	var keys []string
	for _, r := range cps {
		if r.Value != nil {
			t.Fatalf("checkpoint record %s is not a tombstone", r.Key)
		}
		if want := kafka.Partition(r.Key, 3); r.Partition != want {
			t.Fatalf("checkpoint tombstone %s in partition %d, want %d", r.Key, r.Partition, want)
		}
		keys = append(keys, string(r.Key))
	}
	slices.Sort(keys)
	if !slices.Equal(keys, f.goneCPKeys) {
		t.Fatalf("checkpoint tombstones %v, want %v", keys, f.goneCPKeys)
	}

	for action, n := range map[string]float64{actionRedacted: float64(due), actionDeleted: 0, actionCheckpointsRemoved: 3, actionWindowsRemoved: 2} {
		if got := counter(t, reg, "larkline_retention_rows_total", "action", action); got != n {
			t.Errorf("rows_total{%s} = %v, want %v", action, got, n)
		}
	}
	if got := counter(t, reg, "larkline_retention_last_success_timestamp_seconds", "", ""); got <= 0 {
		t.Errorf("last success = %v", got)
	}

	t.Run("a second run changes and publishes nothing", func(t *testing.T) {
		evEnd, cpEnd := testenv.EndOffsets(t, e.evTopic), testenv.EndOffsets(t, e.cpTopic)
		rep, err := j.RunOnce(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Report{Mode: ModeRedact, Complete: true}); plain(t, rep, e.cutoff) != want {
			t.Fatalf("second report %+v, want %+v", rep, want)
		}
		equalState(t, "second run", e.snapshot(t), after)
		if testenv.EndOffsets(t, e.evTopic) != evEnd || testenv.EndOffsets(t, e.cpTopic) != cpEnd {
			t.Fatal("second run published records")
		}
	})
}

func TestDeleteMode(t *testing.T) {
	r := runMode(t, ModeDelete)
	e, f, j, reg, ctx, after, due := r.e, r.f, r.j, r.reg, r.ctx, r.after, r.due

	// Entries stay; the bindings to deleted evidence went with it.
	for _, id := range []int64{f.humanEntry, f.aiEntry} {
		if _, ok := after.entries[id]; !ok {
			t.Fatalf("entry %d deleted", id)
		}
	}
	h, err := e.st.GetEntry(ctx, "ws-a", f.humanEntry)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.EvidenceIDs, f.keptBound) {
		t.Fatalf("human entry evidence %v, want only the surviving %v", h.EvidenceIDs, f.keptBound)
	}

	// One tombstone per deleted row, nothing else, each in the partition of its chat
	// (where the evidence versions it deletes live), or compaction would miss them.
	var keys, wantKeys []string
	for _, r := range testenv.ReadTopic(t, e.evTopic) {
		if r.Value != nil {
			t.Fatalf("record %s is not a tombstone", r.Key)
		}
		if want := kafka.Partition(r.Key, 3); r.Partition != want {
			t.Fatalf("tombstone %s in partition %d, want %d", r.Key, r.Partition, want)
		}
		keys = append(keys, string(r.Key))
	}
	for _, m := range f.due() {
		wantKeys = append(wantKeys, ids.EvidenceKey(m.ws, m.chat, m.msg))
	}
	slices.Sort(keys)
	slices.Sort(wantKeys)
	if !slices.Equal(keys, wantKeys) {
		t.Fatalf("tombstones %v\n want %v", keys, wantKeys)
	}
	if got := counter(t, reg, "larkline_retention_rows_total", "action", actionDeleted); got != float64(due) {
		t.Fatalf("rows_total{deleted} = %v, want %d", got, due)
	}

	t.Run("a second run changes and publishes nothing", func(t *testing.T) {
		end := testenv.EndOffsets(t, e.evTopic)
		rep, err := j.RunOnce(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Report{Mode: ModeDelete, Complete: true}); plain(t, rep, e.cutoff) != want {
			t.Fatalf("second report %+v, want %+v", rep, want)
		}
		equalState(t, "second run", e.snapshot(t), after)
		if testenv.EndOffsets(t, e.evTopic) != end {
			t.Fatal("second run published records")
		}
	})
}

// TestDryRun previews each mode: the counts equal what the real run then does, and
// nothing changes in Postgres or Kafka.
func TestDryRun(t *testing.T) {
	for _, mode := range []Mode{ModeRedact, ModeDelete} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t)
			e.seed(t)
			j, reg := e.job(t, mode, nil)
			ctx := testenv.Context(t, 2*time.Minute)
			before := e.snapshot(t)

			preview, err := j.RunOnce(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			equalState(t, "dry run", e.snapshot(t), before)
			if n := testenv.EndOffsets(t, e.evTopic) + testenv.EndOffsets(t, e.cpTopic); n != 0 {
				t.Fatalf("dry run wrote %d records", n)
			}
			if got := counter(t, reg, "larkline_retention_rows_total", "action", actionWindowsRemoved); got != 0 {
				t.Fatalf("dry run counted %v removed windows", got)
			}
			if preview.Redacted+preview.Deleted == 0 || preview.CheckpointsRemoved == 0 || preview.WindowsRemoved == 0 {
				t.Fatalf("dry run found nothing: %+v", preview)
			}

			done, err := j.RunOnce(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			if !preview.DryRun || done.DryRun {
				t.Fatalf("dry run flags: preview %v, run %v", preview.DryRun, done.DryRun)
			}
			preview.DryRun = false
			if plain(t, preview, e.cutoff) != plain(t, done, e.cutoff) {
				t.Fatalf("preview %+v\n  run %+v", preview, done)
			}
		})
	}
}

// TestKafkaFailureLeavesDatabaseUntouched publishes to a topic that does not exist:
// the batch is not acknowledged, so nothing changes in Postgres; a run against the
// right topic then does the whole job.
func TestKafkaFailureLeavesDatabaseUntouched(t *testing.T) {
	for _, mode := range []Mode{ModeRedact, ModeDelete} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t)
			f := e.seed(t)
			ctx := testenv.Context(t, 2*time.Minute)
			before := e.snapshot(t)
			missing := e.evTopic + "-missing"
			j, reg := e.job(t, mode, func(o *Options) { o.EvidenceTopic = missing; o.ProduceTimeout = 3 * time.Second })
			rep, err := j.RunOnce(ctx, false)
			if err == nil {
				t.Fatal("no error publishing to a missing topic")
			}
			if reason, ok := failureReason(err); !ok || reason != reasonKafka {
				t.Fatalf("error %v: reason %q, want kafka", err, reason)
			}
			if rep.Complete || rep.Redacted+rep.Deleted != 0 {
				t.Fatalf("report after the failure: %+v", rep)
			}
			equalState(t, "after a Kafka failure", e.snapshot(t), before)
			if got := counter(t, reg, "larkline_retention_failures_total", "reason", reasonKafka); got != 1 {
				t.Fatalf("failures_total{kafka} = %v", got)
			}
			if got := counter(t, reg, "larkline_retention_last_success_timestamp_seconds", "", ""); got != 0 {
				t.Fatalf("last success set by a failed run: %v", got)
			}

			good, _ := e.job(t, mode, nil)
			if _, err := good.RunOnce(ctx, false); err != nil {
				t.Fatal(err)
			}
			checkAfterRun(t, e, f, mode, before, e.snapshot(t))
		})
	}
}

// TestRepeatAfterPublish: a crash after Kafka acknowledged a batch but before the
// database changed leaves the redaction on the topic and the row as it was. The
// crashed run's record is produced here with the job's own producer and redaction;
// the next run publishes it again and changes the row.
func TestRepeatAfterPublish(t *testing.T) {
	e := newEnv(t)
	f := e.seed(t)
	ctx := testenv.Context(t, 2*time.Minute)
	before := e.snapshot(t)
	j, _ := e.job(t, ModeRedact, nil)
	// Publish the first batch's redactions as the crashed run would have.
	m := f.due()[0]
	row := evidenceRow{ID: m.id, Workspace: m.ws, SourceKey: m.original.SourceKey, OccurredAt: m.original.OccurredAt,
		SourceUpdatedAt: m.original.SourceUpdatedAt, ActorID: m.original.ActorID, ActorName: m.original.ActorDisplayName,
		Content: m.original.Content, ContentHash: m.original.ContentHash, Metadata: m.original.Metadata, Eligible: m.original.SynthesisEligible}
	red := redact(row, e.now.Truncate(time.Millisecond))
	value, err := e.codecs.Evidence.Encode(ctx, *red.record)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.cl.ProduceSync(ctx, kgoRecord(e.evTopic, red.record.Key(), value)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	equalState(t, "published only", e.snapshot(t), before)

	if _, err := j.RunOnce(ctx, false); err != nil {
		t.Fatal(err)
	}
	checkAfterRun(t, e, f, ModeRedact, before, e.snapshot(t))
	// The message has two identical redactions on the topic: harmless, compaction
	// keeps one.
	var n int
	var values [][]byte
	for _, r := range testenv.ReadTopic(t, e.evTopic) {
		if string(r.Key) == red.record.Key() {
			n++
			values = append(values, r.Value)
		}
	}
	if n != 2 {
		t.Fatalf("%d records for %s, want the crashed run's and the repeat", n, red.record.Key())
	}
	a, _ := e.codecs.Evidence.Decode(ctx, values[0])
	b, _ := e.codecs.Evidence.Decode(ctx, values[1])
	if a.ContentHash != b.ContentHash || a.MetadataJSON != b.MetadataJSON {
		t.Fatalf("the repeat differs: %+v vs %+v", a, b)
	}
}

func TestBusyAndBounded(t *testing.T) {
	e := newEnv(t)
	f := e.seed(t)
	ctx := testenv.Context(t, 2*time.Minute)
	before := e.snapshot(t)

	t.Run("another holder of the lock", func(t *testing.T) {
		conn, err := e.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, advisoryLockKey); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, advisoryLockKey) //nolint:errcheck
		j, _ := e.job(t, ModeDelete, nil)
		if _, err := j.RunOnce(ctx, false); !errors.Is(err, ErrBusy) || !IsRetryable(err) {
			t.Fatalf("run while locked: %v, want retryable ErrBusy", err)
		}
		if rep, err := j.RunOnce(ctx, true); err != nil || rep.Deleted == 0 {
			t.Fatalf("dry run while locked: %+v, %v", rep, err)
		}
		equalState(t, "while locked", e.snapshot(t), before)
	})

	t.Run("max run time stops between batches", func(t *testing.T) {
		j, reg := e.job(t, ModeDelete, func(o *Options) { o.MaxRunTime = time.Nanosecond })
		rep, err := j.RunOnce(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Complete || rep.Deleted != 0 {
			t.Fatalf("report %+v, want an incomplete run that did nothing", rep)
		}
		if got := counter(t, reg, "larkline_retention_last_success_timestamp_seconds", "", ""); got != 0 {
			t.Fatalf("incomplete run set last success: %v", got)
		}
		equalState(t, "stopped run", e.snapshot(t), before)
		full, _ := e.job(t, ModeDelete, nil)
		if rep, err := full.RunOnce(ctx, false); err != nil || !rep.Complete {
			t.Fatalf("next run: %+v, %v", rep, err)
		}
		checkAfterRun(t, e, f, ModeDelete, before, e.snapshot(t))
	})
}

func TestRunAndClose(t *testing.T) {
	e := newEnv(t)
	e.seed(t)
	j, reg := e.job(t, ModeRedact, func(o *Options) { o.Interval = time.Second })
	ctx := testenv.Context(t, time.Minute)
	done := make(chan error, 1)
	go func() { done <- j.Run(ctx) }()
	testenv.Eventually(t, time.Minute, "a successful pass", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		default:
		}
		return counter(t, reg, "larkline_retention_last_success_timestamp_seconds", "", "") != 0
	})
	if err := j.Run(ctx); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run: %v", err)
	}
	j.Close()
	if err := <-done; err != nil {
		t.Fatalf("Run after Close returned %v", err)
	}
	if _, err := j.RunOnce(ctx, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("RunOnce after Close: %v", err)
	}
	if err := j.Run(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	j.Close()
}
