package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
)

// TestRegistryConfluentPipelineWithRegistryRestart runs the whole pipeline with
// schemas.registry.url set to a real schema registry (Apicurio Registry), so every
// stage writes and reads the Confluent wire format. The registry is stopped after the
// operator's setup (which registered the workspace schema) and before the first
// event, so the webhook's first evidence cannot be encoded: it answers 5xx, Lark
// redelivers, and once the registry is back (same schemas and ids) the scenario
// completes with nothing lost or doubled (the pipeline invariants), no record parked,
// and every value on the evidence and closed-window topics in the Confluent format
// with an id the registry holds under <topic>-value.
func TestRegistryConfluentPipelineWithRegistryRestart(t *testing.T) {
	t.Parallel()
	reg := testenv.NewSchemaRegistry(t)
	p := newPipeline(t, pipelineOptions{
		Env:           []string{"LARKLINE_SCHEMAS__REGISTRY__URL=" + reg.URL},
		RetrySchedule: longRetries,
	})
	ctx := p.ctx
	reg.Stop(t)

	encodeFailed := func() float64 {
		n, err := p.procs[procEdge].metric(ctx, "larkline_lark_events_total", `outcome="failed"`, `reason="encode_failed"`)
		if err != nil {
			return -1
		}
		return n
	}
	s := p.sender(longRetries)
	rest := make(chan deliveryResult, 1)
	go func() {
		rep, err := s.Deliver(ctx, p.webhookURL(), p.sc.Events())
		rest <- deliveryResult{rep, err}
	}()
	if err := waitFor(ctx, time.Minute, func() bool { return encodeFailed() > 0 },
		func() string { return "the webhook encoded evidence with the registry down" }); err != nil {
		t.Fatal(err)
	}
	t.Logf("registry down: %v callbacks failed to encode; starting it again", encodeFailed())
	reg.Start(t)
	rep := p.expectDelivered(<-rest)
	if failedPosts(rep) == 0 {
		t.Fatalf("no webhook POST failed while the registry was down: the fault did not hit producing")
	}
	p.finish(4 * time.Minute)

	// Every stage wrote the Confluent format with ids of its topic's subject.
	regc, err := schemas.NewRegistry(schemas.RegistryOptions{URL: reg.URL, AutoRegister: true})
	if err != nil {
		t.Fatal(err)
	}
	codecs, err := schemas.NewCodecs(schemas.Topics{
		Evidence: p.topic("evidence"), ClosedWindow: p.topic("windows-closed"), Checkpoint: p.topic("checkpoints"),
		Workspace: p.topic("workspaces"), DeadLetter: p.topic("deadletter"),
	}, schemas.WithRegistry(regc))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, name := range []string{"evidence", "windows-closed", "workspaces"} {
		topic := p.topic(name)
		ids := subjectIDs(t, reg.URL, topic+"-value")
		p.readTopic(ctx, topic, func(r *kgo.Record) {
			if len(r.Value) == 0 {
				return // a tombstone
			}
			if len(r.Value) < 5 || r.Value[0] != 0 || !ids[binary.BigEndian.Uint32(r.Value[1:5])] {
				t.Fatalf("%s/%d@%d is not the Confluent format with an id of %s-value (ids %v): % x",
					topic, r.Partition, r.Offset, topic, ids, r.Value[:min(5, len(r.Value))])
			}
			var derr error
			switch name {
			case "evidence":
				_, derr = codecs.Evidence.Decode(ctx, r.Value)
			case "windows-closed":
				_, derr = codecs.ClosedWindow.Decode(ctx, r.Value)
			case "workspaces":
				_, derr = codecs.Workspace.Decode(ctx, r.Value)
			}
			if derr != nil {
				t.Fatalf("%s/%d@%d: %v", topic, r.Partition, r.Offset, derr)
			}
			counts[name]++
		})
	}
	// (the workspaces topic is checked too: it may be empty in this scenario, but any
	// record on it must be in the Confluent format)
	if counts["evidence"] == 0 || counts["windows-closed"] == 0 {
		t.Fatalf("records read per topic %v: a stage wrote nothing", counts)
	}
	if rows := p.evidenceCount(ctx); rows <= 0 || rows > counts["evidence"] {
		t.Fatalf("%d evidence rows in Postgres from %d evidence records", rows, counts["evidence"])
	}
	parked := 0
	p.readTopic(ctx, p.topic("deadletter"), func(*kgo.Record) { parked++ })
	if parked != 0 {
		t.Fatalf("%d records parked in the dead-letter topic", parked)
	}
	t.Logf("Confluent records per topic %v, %d webhook POSTs refused while the registry was down", counts, failedPosts(rep))
}

// subjectIDs returns the schema ids of every version of subject (none when the
// registry has no such subject).
func subjectIDs(t *testing.T, base, subject string) map[uint32]bool {
	t.Helper()
	get := func(path string, out any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return // no such subject: nothing was written in the Confluent format there
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var versions []int
	get("/subjects/"+url.PathEscape(subject)+"/versions", &versions)
	ids := map[uint32]bool{}
	for _, v := range versions {
		var sv struct {
			ID uint32 `json:"id"`
		}
		get(fmt.Sprintf("/subjects/%s/versions/%d", url.PathEscape(subject), v), &sv)
		ids[sv.ID] = true
	}
	return ids
}
