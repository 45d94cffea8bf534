package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/deadletters"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestDeadLettersListAndRedrive: the sink role parks a record Postgres refuses;
// `larkline deadletters list` shows it (stage, reason, key, time, never its text);
// after the fix `deadletters redrive --stage sink` writes it through the sink's
// checks, and a second redrive changes nothing (issue #19). Before the fix the
// dead letter carried the text and there was no way to feed it back.
func TestDeadLettersListAndRedrive(t *testing.T) {
	cfg := roleConfig(t)
	st := openTestStore(t, cfg)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cfg.Postgres.DSN.Value())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence ADD CONSTRAINT dl_test_no_poison CHECK (content NOT LIKE '%poison%')`); err != nil {
		t.Fatal(err)
	}
	// The command reads its configuration from a file and the environment.
	path := filepath.Join(t.TempDir(), "larkline.yaml")
	var y bytes.Buffer
	if err := cfg.WriteYAML(&y); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, y.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LARKLINE_POSTGRES__DSN", cfg.Postgres.DSN.Value())

	codecs, err := newCodecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	rec := func(msg, text string) *kgo.Record {
		r := schemas.EvidenceRecord{
			WorkspaceID: "ws-dl", ChatID: "oc_dl", MessageID: ids.MessageID(msg),
			Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage, SourceKey: ids.MessageSourceKey("oc_dl", ids.MessageID(msg)),
			OccurredAt: at, SourceUpdatedAt: at, ObservedAt: at, ActorID: "ou_1", MessageType: "text", Content: text,
			ContentHash: fmt.Sprintf("%x", sha256.Sum256([]byte(text))), SynthesisEligible: true, MetadataJSON: "{}",
			IngestPath: schemas.IngestEvent,
		}
		v, err := codecs.Evidence.Encode(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: cfg.Kafka.Topics.Evidence, Key: []byte(r.Key()), Value: v}
	}
	const secret = "poison: the root password is hunter2"
	if _, err := st.UpsertWorkspace(ctx, store.Workspace{ID: "ws-dl", Type: "incident", Status: store.WorkspaceFiring, CreatedAt: at.Add(-time.Hour)}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.BindChat(ctx, "ws-dl", "oc_dl"); err != nil { // redrive re-drives only bound chats' records
		t.Fatal(err)
	}
	prod, err := newKafkaClient(cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	testkafka.Produce(t, prod, rec("om_good", "all good"), rec("om_poison", secret))
	startTestRoles(t, cfg, "sink")

	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := dispatch(ctx, append(args, "--config", path), &out, &errOut); code != 0 {
			t.Fatalf("larkline %s exited %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		if strings.Contains(out.String()+errOut.String(), "hunter2") {
			t.Fatalf("larkline %s printed the parked message's text:\n%s\n%s", strings.Join(args, " "), out.String(), errOut.String())
		}
		return out.String()
	}
	list := func() []deadletters.Entry {
		var es []deadletters.Entry
		if err := json.Unmarshal([]byte(run("deadletters", "list", "--format", "json", "--stage", "sink")), &es); err != nil {
			t.Fatal(err)
		}
		return es
	}
	waitFor(t, time.Minute, "the refused record to be parked", func() bool { return len(list()) == 1 })
	e := list()[0]
	if e.Stage != "sink" || e.Reason != "constraint" || e.Key != "ws-dl/oc_dl/om_poison" || !e.ByReference || e.Redriven != "" {
		t.Fatalf("listed %+v", e)
	}
	if text := run("deadletters", "list"); !strings.Contains(text, "ws-dl/oc_dl/om_poison") || !strings.Contains(text, "constraint") {
		t.Fatalf("text list:\n%s", text)
	}

	content := func() (string, bool) {
		ev, err := st.EvidenceByKeys(ctx, "ws-dl", store.LarkMessageEvidence, []string{ids.MessageSourceKey("oc_dl", "om_poison")})
		if err != nil {
			t.Fatal(err)
		}
		if len(ev) == 0 {
			return "", false
		}
		return ev[0].Content, true
	}
	if _, ok := content(); ok {
		t.Fatal("the refused record is in the table")
	}
	if _, err := pool.Exec(ctx, `ALTER TABLE workspace_timeline_evidence DROP CONSTRAINT dl_test_no_poison`); err != nil {
		t.Fatal(err)
	}
	// Without --apply a redrive is a dry run (issue #29): it checks and reports, and
	// writes nothing.
	var rep deadletters.Report
	if err := json.Unmarshal([]byte(run("deadletters", "redrive", "--stage", "sink", "--reason", "constraint", "--since", "1h")), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.DryRun || rep.Selected != 1 || rep.Outcomes[deadletters.OutcomeWouldRedrive] != 1 {
		t.Fatalf("dry run: %+v", rep)
	}
	if _, ok := content(); ok {
		t.Fatal("the dry run wrote the row")
	}
	rep = deadletters.Report{}
	if err := json.Unmarshal([]byte(run("deadletters", "redrive", "--stage", "sink", "--reason", "constraint", "--since", "1h", "--apply")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Selected != 1 || rep.Outcomes[deadletters.OutcomeApplied] != 1 {
		t.Fatalf("first redrive: %+v", rep)
	}
	if got, ok := content(); !ok || got != secret {
		t.Fatalf("after the redrive the row is %q (present %v)", got, ok)
	}
	rep = deadletters.Report{}
	if err := json.Unmarshal([]byte(run("deadletters", "redrive", "--stage", "sink", "--apply")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Selected != 1 || rep.Outcomes[deadletters.OutcomeSkipped] != 1 {
		t.Fatalf("second redrive: %+v, want the dead letter skipped", rep)
	}
	if es := list(); len(es) != 1 || es[0].Redriven != deadletters.OutcomeApplied {
		t.Fatalf("after the redrive: %+v", es)
	}
	// --format text is a table and the outcome counts, not the JSON report (issue #32:
	// the flag used to be ignored).
	if text := run("deadletters", "redrive", "--stage", "sink", "--format", "text"); strings.HasPrefix(strings.TrimSpace(text), "{") ||
		!strings.Contains(text, "ws-dl/oc_dl/om_poison") || !strings.Contains(text, "stage sink: 1 selected, skipped 1") {
		t.Fatalf("redrive --format text:\n%s", text)
	}

	// The lag role exports what is parked and what was re-driven.
	lag, _ := startTestRoles(t, cfg, "lag")
	waitFor(t, time.Minute, "larkline_deadletters_redriven{sink,applied} = 1", func() bool {
		return gaugeValue(t, lag, "larkline_deadletters_redriven", map[string]string{"stage": "sink", "outcome": "applied"}) == 1
	})
	if v := gaugeValue(t, lag, "larkline_deadletters_parked", map[string]string{"stage": "sink", "reason": "constraint"}); v > 0 {
		t.Fatalf("larkline_deadletters_parked{sink,constraint} = %v after the redrive, want none", v)
	}
}

// gaugeValue reads one gauge series of r's registry; -1 when absent.
func gaugeValue(t *testing.T, r *running, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := r.rt.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}
