package store

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/larkline/larkline/schemas/ids"
)

func TestSummaryHumanNeverOverwritten(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	const ws ids.WorkspaceID = "ws-sum"
	if _, err := s.GetSummary(ctx, ws); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetSummary before any = %v, want ErrNotFound", err)
	}
	steps := []struct {
		name       string
		human      bool
		text       string
		wantWrote  bool
		wantText   string
		wantSource EntrySource
	}{
		{"first AI summary is written", false, "ai 1", true, "ai 1", EntryFromAI},
		{"AI replaces AI", false, "ai 2", true, "ai 2", EntryFromAI},
		{"human replaces AI", true, "human 1", true, "human 1", EntryFromHuman},
		{"AI never replaces human", false, "ai 3", false, "human 1", EntryFromHuman},
		{"human replaces human", true, "human 2", true, "human 2", EntryFromHuman},
	}
	for _, st := range steps {
		if st.human {
			if err := s.PutHumanSummary(ctx, ws, st.text); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		} else {
			wrote, err := s.PutAISummaryIfNotHuman(ctx, ws, st.text, []byte(`{"window":"w"}`))
			if err != nil || wrote != st.wantWrote {
				t.Fatalf("%s: wrote %v %v, want %v", st.name, wrote, err, st.wantWrote)
			}
		}
		got, err := s.GetSummary(ctx, ws)
		if err != nil || got.Text != st.wantText || got.Source != st.wantSource {
			t.Fatalf("%s: summary %+v %v", st.name, got, err)
		}
	}
}

// An AI write racing a human write never ends with the AI text over the human one.
func TestSummaryAIRacingHuman(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	for i := range 20 {
		ws := ids.WorkspaceID("ws-race-" + string(rune('a'+i)))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := s.PutAISummaryIfNotHuman(ctx, ws, "ai", nil); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := s.PutHumanSummary(ctx, ws, "human"); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		got, err := s.GetSummary(ctx, ws)
		if err != nil || got.Text != "human" || got.Source != EntryFromHuman {
			t.Fatalf("workspace %s: %+v %v; want the human summary", ws, got, err)
		}
	}
}

func TestSummaryValidation(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := context.Background()
	if _, err := s.PutAISummaryIfNotHuman(ctx, "ws", "x", []byte(`[]`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("array metadata: %v", err)
	}
	if err := s.PutHumanSummary(ctx, "ws", "bad\x00"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("NUL text: %v", err)
	}
	if _, err := s.GetSummary(ctx, "bad ws"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad workspace: %v", err)
	}
}
