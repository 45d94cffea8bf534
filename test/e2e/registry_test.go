package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/larkline/larkline/internal/testenv"
)

// TestRegistryConfluentPipelineWithRegistryRestart runs the whole pipeline with
// schemas.registry.url set to a real schema registry (Apicurio Registry) behind an
// authenticating gateway (testenv.RegistryGateway; larkline sends basic auth), so
// every stage writes and reads the Confluent wire format. The registry is stopped after the
// operator's setup (which registered the workspace schema) and before the first
// event, so the webhook's first evidence cannot be encoded: it answers 5xx, Lark
// redelivers, and once the registry is back (same schemas and ids) the scenario
// completes with nothing lost or doubled (the pipeline invariants), no record parked,
// and every value on the evidence and closed-window topics in the Confluent format
// with an id the registry holds under <topic>-value, read back by a plain
// Confluent-format consumer (franz-go's sr.Serde with a bearer token, goavro; no
// larkline code).
func TestRegistryConfluentPipelineWithRegistryRestart(t *testing.T) {
	t.Parallel()
	reg := testenv.NewSchemaRegistry(t)
	const user, pass, token = "larkline-e2e", "e2e-registry-pass", "e2e-registry-token"
	gw, refused := testenv.RegistryGateway(t, reg.URL, user, pass, token)
	pwFile := filepath.Join(t.TempDir(), "registry-password")
	if err := os.WriteFile(pwFile, []byte(pass), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newPipeline(t, pipelineOptions{
		Env: []string{"LARKLINE_SCHEMAS__REGISTRY__URL=" + gw, "LARKLINE_SCHEMAS__REGISTRY__USERNAME=" + user,
			"LARKLINE_SCHEMAS__REGISTRY__PASSWORDFILE=" + pwFile},
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

	// Every stage wrote the Confluent format with ids of its topic's subject, and a
	// plain Confluent consumer reads them.
	rc, err := sr.NewClient(sr.URLs(gw), sr.BearerToken(token))
	if err != nil {
		t.Fatal(err)
	}
	var serde sr.Serde
	known := map[int]bool{}
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
			id, _, err := serde.DecodeID(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !known[id] {
				registerAvroDecoder(ctx, t, rc, &serde, id)
				known[id] = true
			}
			var v map[string]any
			if err := serde.Decode(r.Value, &v); err != nil {
				t.Fatalf("%s/%d@%d: the Confluent consumer cannot decode it: %v", topic, r.Partition, r.Offset, err)
			}
			key := "workspace_id"
			if name == "workspaces" {
				key = "id"
			}
			if ws, _ := v[key].(string); ws == "" {
				t.Fatalf("%s/%d@%d decoded to a record without %s: %v", topic, r.Partition, r.Offset, key, v)
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
	if refused.Load() != 0 {
		t.Fatalf("the registry gateway refused %d requests: some process did not authenticate", refused.Load())
	}
	t.Logf("Confluent records per topic %v, %d webhook POSTs refused while the registry was down", counts, failedPosts(rep))
}

// registerAvroDecoder fetches the writer schema of id from the registry and
// registers a goavro decoder of it with serde, as any Confluent consumer does.
func registerAvroDecoder(ctx context.Context, t *testing.T, rc *sr.Client, serde *sr.Serde, id int) {
	t.Helper()
	s, err := rc.SchemaByID(ctx, id)
	if err != nil {
		t.Fatalf("schema id %d: %v", id, err)
	}
	codec, err := goavro.NewCodec(s.Schema)
	if err != nil {
		t.Fatalf("schema id %d: %v", id, err)
	}
	serde.Register(id, map[string]any{}, sr.DecodeFn(func(b []byte, v any) error {
		native, rest, err := codec.NativeFromBinary(b)
		if err == nil && len(rest) != 0 {
			err = fmt.Errorf("%d trailing bytes", len(rest))
		}
		if err == nil {
			*v.(*map[string]any) = native.(map[string]any)
		}
		return err
	}))
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
