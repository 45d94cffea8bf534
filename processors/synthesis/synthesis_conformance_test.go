package synthesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestConformance runs the shared delivery-guarantee suite on the synthesis worker: the
// closed-window topic in, window states and timeline entries out, on the real broker
// and Postgres, with the rule synthesizer.
func TestConformance(t *testing.T) { conformance.Run(t, synthesisStage{}) }

// synthesisStage: an entity is a closed window holding one message ("We rolled back
// the deploy of e<n>.v1."), which the rules turn into one mitigation entry. A window
// has one version; three chats share the entities, so each key (chat) carries several
// windows in order.
type synthesisStage struct{}

func (synthesisStage) Versions() int { return 1 }

func (synthesisStage) Deploy(t *testing.T) conformance.Deployment {
	e := newEnv(t)
	e.topic = testenv.NewTopic(t, 3, nil) // newEnv's topic has one partition
	e.group = "synthesis-" + e.topic
	var err error
	if e.codecs, err = schemas.NewCodecs(schemas.Topics{ClosedWindow: e.topic, DeadLetter: e.dlq}); err != nil {
		t.Fatal(err)
	}
	return &synthesisDeployment{e: e, labels: map[int64]string{}}
}

type synthesisDeployment struct {
	e      *env
	labels map[int64]string // evidence id → record label
}

func (d *synthesisDeployment) Wiring() conformance.Wiring {
	return conformance.Wiring{Input: d.e.topic, Group: d.e.group}
}

func (d *synthesisDeployment) Start(t *testing.T) func() {
	r := d.e.start(d.e.options())
	return func() { r.stop(t) }
}

// confWindow places entity n: chat oc_conf<n mod 3>, the (n/3)-th window from win, its
// one message a minute after the window starts (out of the next window's context).
func confWindow(r conformance.Record) (chat ids.ChatID, start time.Time, text string) {
	return ids.ChatID(fmt.Sprintf("oc_conf%d", r.Entity%3)), win.Add(time.Duration(r.Entity/3) * winLen),
		"We rolled back the deploy of " + r.String() + "."
}

func (d *synthesisDeployment) Message(t *testing.T, r conformance.Record) conformance.Message {
	ctx := context.Background()
	chat, start, text := confWindow(r)
	msg := ids.MessageID(fmt.Sprintf("om_e%d", r.Entity))
	at := start.Add(time.Minute)
	ev := store.Evidence{
		WorkspaceID: d.e.ws, Source: ids.SourceLark, SourceType: ids.SourceTypeLarkMessage,
		SourceKey: ids.MessageSourceKey(chat, msg), OccurredAt: at, SourceUpdatedAt: at,
		ActorID: "ou_alice", ActorDisplayName: "Alice", Content: text, ContentHash: hashText(text),
		Metadata:          []byte(fmt.Sprintf(`{"chat_id":%q,"message_type":"text","sender_type":"user"}`, chat)),
		SynthesisEligible: true,
	}
	if _, err := d.e.st.UpsertEvidence(ctx, []store.Evidence{ev}); err != nil { // the sink's part
		t.Fatalf("seed evidence of %v: %v", r, err)
	}
	rows, err := d.e.st.EvidenceByKeys(ctx, d.e.ws, store.LarkMessageEvidence, []string{ev.SourceKey})
	if err != nil || len(rows) != 1 {
		t.Fatalf("read back evidence of %v: %d rows, %v", r, len(rows), err)
	}
	d.labels[rows[0].ID] = r.String()
	cw := schemas.ClosedWindow{WorkspaceID: d.e.ws, ChatID: chat, WindowStart: start, WindowEnd: start.Add(winLen),
		ProcessorVersion: ids.DefaultProcessorVersion, EvidenceCount: 1, EvidenceEndOffset: 1,
		FirstOccurredAt: at, LastOccurredAt: at, ClosedAt: start.Add(winLen + 3*time.Minute),
		Reason: schemas.CloseReasonGraceElapsed}
	v, err := d.e.codecs.ClosedWindow.Encode(ctx, cw)
	if err != nil {
		t.Fatalf("encode closed window of %v: %v", r, err)
	}
	return conformance.Message{Key: cw.Key(), Value: v}
}

// Observe renders every window state (its status) and every entry (kind, title,
// status, source and the labels of its evidence), without ids, times and fingerprints.
func (d *synthesisDeployment) Observe(t *testing.T) conformance.Observation {
	ctx := context.Background()
	rows, err := d.e.st.Pool().Query(ctx, `SELECT source_key, status FROM workspace_timeline_sync_states`)
	if err != nil {
		t.Fatal(err)
	}
	var o conformance.Observation
	for rows.Next() {
		var key, status string
		if err := rows.Scan(&key, &status); err != nil {
			t.Fatal(err)
		}
		o = append(o, "window "+key+" "+status)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, e := range d.e.entries() {
		labels := make([]string, len(e.EvidenceIDs))
		for i, id := range e.EvidenceIDs {
			labels[i] = d.labels[id]
		}
		slices.Sort(labels)
		o = append(o, entryLine(e.Kind, e.Title, string(e.Status), string(e.Source), labels))
	}
	return o
}

func (d *synthesisDeployment) Expect(records []conformance.Record) conformance.Observation {
	var o conformance.Observation
	for _, r := range conformance.Latest(records) {
		chat, start, text := confWindow(r)
		o = append(o, "window "+ids.WindowSourceKey(chat, ids.DefaultProcessorVersion, start)+" "+string(store.WindowCompleted),
			entryLine("mitigation", text, string(store.EntryStatusDraft), string(store.EntryFromAI), []string{r.String()}))
	}
	return o
}

func entryLine(kind, title, status, source string, evidence []string) string {
	return fmt.Sprintf("entry kind=%s title=%q status=%s source=%s evidence=[%s]", kind, title, status, source, strings.Join(evidence, " "))
}
