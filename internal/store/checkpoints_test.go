package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

func TestAdvanceCheckpointNeverMovesBackwards(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-cp"
	const chat ids.ChatID = "oc_cp"
	if _, err := s.GetCheckpoint(ctx, ws, chat); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetCheckpoint before any = %v, want ErrNotFound", err)
	}
	at := func(d time.Duration, msg ids.MessageID) CheckpointPosition {
		return CheckpointPosition{Time: t0.Add(d), MessageID: msg}
	}
	steps := []struct {
		name     string
		pos      CheckpointPosition
		meta     CheckpointMeta
		advanced bool
		want     CheckpointPosition
		wantMeta string
	}{
		{"first page creates", at(time.Minute, "om_b"), CheckpointMeta{ReconcileVersion: "r1"}, true, at(time.Minute, "om_b"), "r1"},
		{"later page advances", at(2*time.Minute, "om_c"), CheckpointMeta{ReconcileVersion: "r2"}, true, at(2*time.Minute, "om_c"), "r2"},
		{"older page is ignored", at(time.Minute, "om_z"), CheckpointMeta{ReconcileVersion: "old"}, false, at(2*time.Minute, "om_c"), "r2"},
		{"same time, smaller message id is ignored", at(2*time.Minute, "om_a"), CheckpointMeta{ReconcileVersion: "old"}, false, at(2*time.Minute, "om_c"), "r2"},
		{"same position replaces metadata only", at(2*time.Minute, "om_c"), CheckpointMeta{ReconcileVersion: "r3"}, false, at(2*time.Minute, "om_c"), "r3"},
		{"same time, larger message id advances", at(2*time.Minute, "om_d"), CheckpointMeta{ReconcileVersion: "r4"}, true, at(2*time.Minute, "om_d"), "r4"},
		{"time-only position after it advances", at(3*time.Minute, ""), CheckpointMeta{ReconcileVersion: "r5"}, true, at(3*time.Minute, ""), "r5"},
	}
	for _, st := range steps {
		cp, advanced, err := s.AdvanceCheckpoint(ctx, ws, chat, st.pos, st.meta)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if advanced != st.advanced || cp.Position.Compare(st.want) != 0 || cp.Meta.ReconcileVersion != st.wantMeta {
			t.Fatalf("%s: advanced %v position %+v meta %+v; want %v %+v %s", st.name, advanced, cp.Position, cp.Meta, st.advanced, st.want, st.wantMeta)
		}
		got, err := s.GetCheckpoint(ctx, ws, chat)
		if err != nil || got.Position.Compare(st.want) != 0 || got.Chat != chat || got.Workspace != ws {
			t.Fatalf("%s: GetCheckpoint %+v %v", st.name, got, err)
		}
	}
	if n := syncStateRows(t, s, ws); n != 1 {
		t.Fatalf("%d checkpoint rows for one chat, want 1", n)
	}
	var cursor string
	if err := s.pool.QueryRow(ctx, `SELECT last_seen_cursor FROM workspace_timeline_sync_states WHERE workspace_id = $1`, string(ws)).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	if want := "1772359380000:"; cursor != want { // create_time_ms of t0+3m, no message id
		t.Fatalf("last_seen_cursor %q, want %q", cursor, want)
	}
}

func TestAdvanceCheckpointValidatesAndBoundsDiagnostics(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	cases := []struct {
		name string
		ws   ids.WorkspaceID
		chat ids.ChatID
		pos  CheckpointPosition
	}{
		{"zero time", "ws", "oc_a", CheckpointPosition{}},
		{"bad message id", "ws", "oc_a", CheckpointPosition{Time: t0, MessageID: "x1"}},
		{"bad chat", "ws", "c1", CheckpointPosition{Time: t0}},
		{"bad workspace", "", "oc_a", CheckpointPosition{Time: t0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := s.AdvanceCheckpoint(ctx, c.ws, c.chat, c.pos, CheckpointMeta{}); !errors.Is(err, ErrInvalid) {
				t.Fatalf("AdvanceCheckpoint = %v, want ErrInvalid", err)
			}
		})
	}
	full := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	cp, _, err := s.AdvanceCheckpoint(ctx, "ws", "oc_a", CheckpointPosition{Time: t0},
		CheckpointMeta{Error: strings.Repeat("e", 5000), LastFullScanAt: &full})
	if err != nil || len(cp.Meta.Error) != MaxDiagnosticBytes || cp.Meta.LastFullScanAt == nil || !cp.Meta.LastFullScanAt.Equal(full) {
		t.Fatalf("diagnostics %d bytes, full scan %v, %v", len(cp.Meta.Error), cp.Meta.LastFullScanAt, err)
	}
}
