package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestConformance runs the shared delivery-guarantee suite on the sink: the evidence
// topic in, workspace_timeline_evidence out, on the real broker and Postgres.
func TestConformance(t *testing.T) {
	conformance.Run(t, sinkStage{})
}

// sinkStage: an entity is a Lark message; its versions are edits that all carry the
// same source_updated_at, so the store's newer-wins rule cannot hide a wrong order.
type sinkStage struct{}

func (sinkStage) Versions() int { return 3 }

func (sinkStage) Deploy(t *testing.T) conformance.Deployment {
	return &sinkDeployment{e: newEnv(t, 3), group: uniqueGroup(t)}
}

type sinkDeployment struct {
	e     *env
	group string
}

func (d *sinkDeployment) Wiring() conformance.Wiring {
	return conformance.Wiring{Input: d.e.topic, Group: d.group}
}

func (d *sinkDeployment) Start(t *testing.T) func() {
	r := start(t, d.e.options(d.group, d.e.st), hooks{})
	return func() { r.shutdown(t) }
}

// confEvidence is version r of entity r.Entity: message om_e<n> of one of four chats.
func confEvidence(r conformance.Record) schemas.EvidenceRecord {
	chat := ids.ChatID(fmt.Sprintf("oc_conf%d", r.Entity%4))
	return evidenceOf("ws-conformance", chat, ids.MessageID(fmt.Sprintf("om_e%d", r.Entity)),
		"message "+r.String(), t0.Add(time.Minute))
}

func (d *sinkDeployment) Message(t *testing.T, r conformance.Record) conformance.Message {
	kr := d.e.record(t, confEvidence(r))
	return conformance.Message{Key: string(kr.Key), Value: kr.Value}
}

func (d *sinkDeployment) Observe(t *testing.T) conformance.Observation {
	var o conformance.Observation
	for key, row := range d.e.rows(t) { // fails the test on two rows for one key
		o = append(o, sinkLine(key, row.Content, row.ContentHash, row.Deleted, row.SynthesisEligible, row.SourceUpdatedAt))
	}
	return o
}

func (d *sinkDeployment) Expect(records []conformance.Record) conformance.Observation {
	var o conformance.Observation
	for _, r := range conformance.Latest(records) {
		ev := confEvidence(r)
		o = append(o, sinkLine(rowKey(ev), ev.Content, ev.ContentHash, ev.Deleted, ev.SynthesisEligible, ev.SourceUpdatedAt))
	}
	return o
}

// sinkLine is one evidence row without its surrogate id.
func sinkLine(key, content, hash string, deleted, eligible bool, updated time.Time) string {
	return fmt.Sprintf("evidence %s content=%q hash=%.16s deleted=%t eligible=%t updated=%s",
		key, content, hash, deleted, eligible, updated.UTC().Format(time.RFC3339Nano))
}
