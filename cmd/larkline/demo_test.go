package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// TestDemoOnceJSON runs `larkline demo --once --format json` on the embedded default
// (kfake, a private Postgres from the local binaries, larktest replaying the bundled
// incident through the webhook and the history API) and checks the result against
// facts of the bundled scenario.
func TestDemoOnceJSON(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, []string{"demo", "--once", "--format", "json", "--http", "127.0.0.1:0", "--timeout", "3m"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exited %d\nstderr:\n%s", code, tail(stderr.String(), 40))
	}
	var res demoResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not the JSON result (%v):\n%s", err, tail(stdout.String(), 20))
	}
	sc, err := larktest.Incident()
	if err != nil {
		t.Fatal(err)
	}
	msgs := sc.Messages()
	if len(res.Workspaces) != 1 || ids.WorkspaceID(res.Workspaces[0].ID) != sc.Workspaces()[0].ID {
		t.Fatalf("workspaces %+v, want the scenario's one", res.Workspaces)
	}
	w := res.Workspaces[0]

	var recalled, dropped, eligible int
	known := map[string]bool{}
	for _, m := range msgs {
		known[string(m.ID)] = true
		if m.Recalled {
			recalled++
		}
		if m.Deliver == larktest.DeliverDrop {
			dropped++
		}
		if !m.FromApp && (m.Type == "text" || m.Type == "post") && !m.Recalled {
			eligible++
		}
	}
	t.Run("evidence: every message once, the dropped one recovered by reconciliation", func(t *testing.T) {
		if dropped == 0 {
			t.Fatal("the bundled scenario has no dropped event to recover")
		}
		if w.Evidence.Total != len(msgs) {
			t.Fatalf("evidence total %d, want %d (one row per message, %d of them only in history)", w.Evidence.Total, len(msgs), dropped)
		}
		if w.Evidence.Redacted != recalled || recalled == 0 {
			t.Fatalf("redacted %d, want the scenario's %d recall(s)", w.Evidence.Redacted, recalled)
		}
		if w.Evidence.SynthesisEligible != eligible {
			t.Fatalf("synthesis-eligible %d, want %d (text and post from people, not recalled)", w.Evidence.SynthesisEligible, eligible)
		}
	})
	t.Run("windows: every non-empty window terminal, none failed", func(t *testing.T) {
		if len(w.Windows) == 0 {
			t.Fatal("no windows")
		}
		completed := 0
		for _, win := range w.Windows {
			if win.Status != "completed" && win.Status != "ignored" {
				t.Errorf("window %s of %s is %q", win.Start.Format(time.RFC3339), win.ChatID, win.Status)
			}
			if win.Status == "completed" {
				completed++
			}
			if win.Start.Minute()%10 != 0 || win.Start.Second() != 0 || win.EvidenceCount < 1 {
				t.Errorf("window %+v: not a non-empty 10-minute UTC window", win)
			}
		}
		if completed == 0 {
			t.Error("no window produced an entry")
		}
	})
	t.Run("entries: drafts bound to the scenario's messages, covering the incident", func(t *testing.T) {
		kinds := map[string]int{}
		for _, e := range w.Entries {
			kinds[e.Kind]++
			if e.Source != "ai" || e.Status != "draft" {
				t.Errorf("entry %d: source %q status %q, want ai draft", e.ID, e.Source, e.Status)
			}
			if len(e.Evidence) == 0 {
				t.Errorf("entry %d (%s) bound to no evidence", e.ID, e.Kind)
			}
			for _, m := range e.Evidence {
				if !known[m] {
					t.Errorf("entry %d bound to %s, not a message of the scenario", e.ID, m)
				}
			}
		}
		for _, k := range []string{"impact", "decision", "mitigation", "root_cause", "recovery"} {
			if kinds[k] == 0 {
				t.Errorf("no %s entry; kinds: %v", k, kinds)
			}
		}
	})
	t.Run("summary written once windows completed", func(t *testing.T) {
		if w.Summary == nil || w.Summary.Source != "ai" || strings.TrimSpace(w.Summary.Text) == "" {
			t.Fatalf("summary %+v", w.Summary)
		}
	})
	t.Run("progress and logs on stderr, never message text", func(t *testing.T) {
		for _, m := range []string{"checkout error rate", "ledger-db", "回滚"} {
			if strings.Contains(stderr.String(), m) {
				t.Errorf("stderr carries message text %q", m)
			}
		}
		if !strings.Contains(stderr.String(), "finished in") {
			t.Errorf("no progress on stderr:\n%s", tail(stderr.String(), 10))
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestDemoDataDirKeepsKafka runs the demo with --data-dir and then opens the
// directory's Kafka data again: --data-dir keeps Kafka's records across runs, as it
// keeps Postgres's (the in-process Kafka used to start empty every run, so a second
// run met Postgres rows and window state whose records were gone).
func TestDemoDataDirKeepsKafka(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "larkline-demo-test-") // world-searchable parent: Postgres runs as postgres
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, []string{"demo", "--once", "--format", "json", "--http", "127.0.0.1:0", "--timeout", "3m", "--data-dir", dir}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("demo exited %d\nstderr:\n%s", code, tail(stderr.String(), 40))
	}
	sc, err := larktest.Incident()
	if err != nil {
		t.Fatal(err)
	}
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(filepath.Join(dir, "kafka")))
	if err != nil {
		t.Fatalf("reopening the demo's Kafka data: %v", err)
	}
	defer kf.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, demoConfig().Kafka.Topics.Evidence)
	if err != nil {
		t.Fatalf("listing the evidence topic's end offsets: %v", err)
	}
	var records int64
	ends.Each(func(o kadm.ListedOffset) { records += o.Offset })
	if records < int64(len(sc.Messages())) {
		t.Fatalf("the data directory's Kafka holds %d evidence records, want at least the scenario's %d messages", records, len(sc.Messages()))
	}
}
