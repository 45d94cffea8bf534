package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// shapeScenario is a small incident: a firing workspace ws-ok bound to the group
// chat oc_ok, six messages a minute apart, and whatever shape adds. Texts are
// distinctive, so that stderr can be searched for them.
func shapeScenario(t *testing.T, appID string, shape func(sc *larktest.Scenario, b larktest.Builder, t0 time.Time)) string {
	t.Helper()
	t0 := time.Date(2025, 6, 12, 14, 0, 0, 0, time.UTC)
	sc, err := larktest.NewScenario(larktest.App{AppID: appID, BotOpenID: "ou_shapebot"})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(sc.AddWorkspace(larktest.Workspace{ID: "ws-ok", Type: "incident", Status: "firing", CreatedAt: t0.Add(-time.Minute)}))
	must(sc.AddBinding("ws-ok", "oc_ok"))
	b := larktest.Builder{AppID: appID, TenantKey: "736588c9260f175e"}
	for i := range 6 {
		must(sc.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: ids.MessageID(fmt.Sprintf("om_ok%d", i)), Chat: "oc_ok",
			From: larktest.Author{OpenID: "ou_alice"}, At: t0.Add(time.Duration(i) * time.Minute)},
			fmt.Sprintf("checkout error rate is %d percent in eu-west", 30+i))))
	}
	shape(sc, b, t0)
	path := filepath.Join(t.TempDir(), "scenario.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	must(f.Close())
	return path
}

// runDemoOnce runs `larkline demo --once --format json` on a scenario file.
func runDemoOnce(t *testing.T, scenario string, timeout time.Duration) (int, demoResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := dispatch(ctx, []string{"demo", "--once", "--format", "json", "--http", "127.0.0.1:0",
		"--scenario", scenario, "--timeout", timeout.String()}, &stdout, &stderr)
	var res demoResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("exit %d; stdout is not the JSON result (%v):\n%s\nstderr:\n%s", code, err, tail(stdout.String(), 20), tail(stderr.String(), 30))
	}
	return code, res, stderr.String()
}

func workspaceOf(t *testing.T, res demoResult, ws string) demoWorkspace {
	t.Helper()
	for _, w := range res.Workspaces {
		if w.ID == ws {
			return w
		}
	}
	t.Fatalf("no workspace %s in the result", ws)
	return demoWorkspace{}
}

// TestDemoOnceFinishesOnIneligibleShapes (issue #17): --once used to wait for one
// evidence row per message and binding, which eligibility rules forbid, and to time
// out without printing. On each shape it must finish as soon as the pipeline has,
// print a complete result, and exit 0; the ineligible parts hold no evidence.
func TestDemoOnceFinishesOnIneligibleShapes(t *testing.T) {
	shapes := []struct {
		name  string
		shape func(sc *larktest.Scenario, b larktest.Builder, t0 time.Time)
		check func(t *testing.T, res demoResult)
	}{
		{"recovered workspace", func(sc *larktest.Scenario, _ larktest.Builder, t0 time.Time) {
			_ = sc.AddWorkspace(larktest.Workspace{ID: "ws-rec", Type: "incident", Status: "recovered", CreatedAt: t0.Add(-time.Minute)})
			_ = sc.AddBinding("ws-rec", "oc_ok")
		}, func(t *testing.T, res demoResult) {
			if w := workspaceOf(t, res, "ws-rec"); w.Evidence.Total != 0 || len(w.Windows) != 0 {
				t.Errorf("recovered workspace: evidence %+v, windows %d; want none", w.Evidence, len(w.Windows))
			}
		}},
		{"messages before the workspace's creation", func(sc *larktest.Scenario, _ larktest.Builder, t0 time.Time) {
			_ = sc.AddWorkspace(larktest.Workspace{ID: "ws-late", Type: "incident", Status: "firing", CreatedAt: t0.Add(150 * time.Second)})
			_ = sc.AddBinding("ws-late", "oc_ok")
		}, func(t *testing.T, res demoResult) {
			if w := workspaceOf(t, res, "ws-late"); w.Evidence.Total != 3 {
				t.Errorf("late workspace: evidence %+v, want the 3 messages after its creation", w.Evidence)
			}
		}},
		{"p2p chat", func(sc *larktest.Scenario, b larktest.Builder, t0 time.Time) {
			_ = sc.AddBinding("ws-ok", "oc_note")
			for i := range 3 {
				d := larktest.DeliverOnce
				if i == 1 {
					d = larktest.DeliverDrop // only in history
				}
				_ = sc.AddEvent(d, b.Text(larktest.Msg{ID: ids.MessageID(fmt.Sprintf("om_note%d", i)), Chat: "oc_note", ChatType: "p2p",
					From: larktest.Author{OpenID: "ou_alice"}, At: t0.Add(time.Duration(i)*time.Minute + 30*time.Second)},
					"my private reminder to call the bank"))
			}
		}, func(t *testing.T, res demoResult) {
			w := workspaceOf(t, res, "ws-ok")
			for _, win := range w.Windows {
				if win.ChatID == "oc_note" {
					t.Errorf("a window of the p2p chat: %+v", win)
				}
			}
			if w.Evidence.Total != 6 {
				t.Errorf("evidence %+v, want the group chat's 6 messages only", w.Evidence)
			}
		}},
		{"workspace beyond 72 hours", func(sc *larktest.Scenario, _ larktest.Builder, t0 time.Time) {
			_ = sc.AddWorkspace(larktest.Workspace{ID: "ws-old", Type: "incident", Status: "firing", CreatedAt: t0.Add(-80 * time.Hour)})
			_ = sc.AddBinding("ws-old", "oc_ok")
		}, func(t *testing.T, res demoResult) {
			if w := workspaceOf(t, res, "ws-old"); w.Evidence.Total != 0 || len(w.Windows) != 0 {
				t.Errorf("old workspace: evidence %+v, windows %d; want none", w.Evidence, len(w.Windows))
			}
		}},
	}
	for i, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			path := shapeScenario(t, fmt.Sprintf("cli_shape%d%d", i, time.Now().UnixNano()%1e9), s.shape)
			code, res, stderr := runDemoOnce(t, path, 150*time.Second)
			if code != 0 || !res.Complete || len(res.WaitingFor) != 0 {
				t.Fatalf("exit %d, complete %t, waiting for %v; want a complete run\nstderr:\n%s", code, res.Complete, res.WaitingFor, tail(stderr, 30))
			}
			ok := workspaceOf(t, res, "ws-ok")
			if ok.Evidence.Total != 6 || len(ok.Windows) == 0 {
				t.Errorf("ws-ok: evidence %+v, %d windows; want its 6 messages", ok.Evidence, len(ok.Windows))
			}
			for _, win := range ok.Windows {
				if win.Status != "completed" && win.Status != "ignored" {
					t.Errorf("window %+v not terminal", win)
				}
			}
			s.check(t, res)
			for _, text := range []string{"private reminder", "checkout error rate"} {
				if strings.Contains(stderr, text) {
					t.Errorf("stderr carries message text %q", text)
				}
			}
		})
	}
}

// TestDemoOnceTimeoutStillPrints: when --once gives up, it prints the result
// document marked incomplete, with what it was waiting for, and exits non-zero.
func TestDemoOnceTimeoutStillPrints(t *testing.T) {
	t.Parallel()
	path := shapeScenario(t, fmt.Sprintf("cli_shapeto%d", time.Now().UnixNano()%1e9), func(*larktest.Scenario, larktest.Builder, time.Time) {})
	code, res, stderr := runDemoOnce(t, path, 2*time.Second)
	if code == 0 || res.Complete || len(res.WaitingFor) == 0 {
		t.Fatalf("exit %d, complete %t, waiting for %v; want a non-zero exit and an incomplete result\nstderr:\n%s",
			code, res.Complete, res.WaitingFor, tail(stderr, 20))
	}
	if len(res.Workspaces) != 1 || res.Workspaces[0].ID != "ws-ok" {
		t.Errorf("workspaces %+v, want ws-ok", res.Workspaces)
	}
	if !strings.Contains(stderr, "not finished after") {
		t.Errorf("stderr does not say why:\n%s", tail(stderr, 10))
	}
}
