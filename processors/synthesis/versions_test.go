package synthesis

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/rules"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas/ids"
)

func TestSettingsCheck(t *testing.T) {
	t.Parallel()
	syn, err := rules.New(rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		s     Settings
		field string // "" when valid
	}{
		{"minimal", Settings{Synthesizer: syn}, ""},
		{"full", Settings{Synthesizer: syn, Summarizer: syn, PromptVersion: "p2", MaxEstimatedTokensPerChunk: 3000, ChunkTimeout: time.Minute}, ""},
		{"no synthesizer", Settings{PromptVersion: "p2"}, "Synthesizer"},
		{"long prompt version", Settings{Synthesizer: syn, PromptVersion: strings.Repeat("p", 65)}, "PromptVersion"},
		{"tiny budget", Settings{Synthesizer: syn, MaxEstimatedTokensPerChunk: minTokensPerChunk - 1}, "MaxEstimatedTokensPerChunk"},
		{"negative timeout", Settings{Synthesizer: syn, ChunkTimeout: -time.Second}, "ChunkTimeout"},
		{"long timeout", Settings{Synthesizer: syn, ChunkTimeout: 2 * time.Hour}, "ChunkTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.s.Check()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var oe *options.Error
			if !errors.Is(err, ErrInvalidOptions) || !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Check: %v, want ErrInvalidOptions naming %s", err, tc.field)
			}
		})
	}
}

// versionTable is a VersionSettings of fixed answers per version.
type versionTable map[string]struct {
	s   Settings
	err error
}

func (v versionTable) Settings(_ context.Context, version string) (Settings, bool, error) {
	r, ok := v[version]
	return r.s, ok && r.err == nil, r.err
}

// TestVersionsSynthesizeWithTheirOwnSettings: the same closed window of four
// processor versions: the default version and one the settings do not know are
// synthesized with the worker's own synthesizer and summarizer; a version with its
// own settings with its synthesizer, summarizer and prompt version, in its own
// namespace; a version whose settings fail fails its attempts with reason
// version_settings and diagnostics naming it, and never reaches a synthesizer.
func TestVersionsSynthesizeWithTheirOwnSettings(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rows := e.seed(win, incidentLines...)
	id := byMessage(rows)
	own := synth.Draft{Kind: synth.KindMitigation, Title: "Drafted under the candidate's settings", OccurredAt: win.Add(2 * time.Minute),
		EvidenceIDs: []int64{id["3"]}}
	o := e.options()
	o.PromptVersion = "deployment-p1"
	ownSum := &countingSummarizer{next: o.Summarizer}
	deploymentSum := &countingSummarizer{next: o.Summarizer}
	o.Summarizer = deploymentSum
	o.MaxAttempts = 2
	o.Registry = prometheus.NewRegistry()
	o.Versions = versionTable{
		"v8": {s: Settings{Synthesizer: fixed{drafts: func(synth.Request) []synth.Draft { return []synth.Draft{own} }},
			Summarizer: ownSum, PromptVersion: "candidate-p8"}},
		"v9": {err: errors.New("synthesis.openai.model is required")},
	}
	var claimed []store.WindowState
	claims := make(chan store.WindowState, 16)
	o.afterClaim = func(_ context.Context, st store.WindowState) error {
		claims <- st
		return nil
	}
	r := e.start(o)
	versions := []string{ids.DefaultProcessorVersion, "v7", "v8", "v9"}
	for _, v := range versions {
		cw := e.closedWindow(win, rows)
		cw.ProcessorVersion = v
		e.produce(cw)
	}
	state := func(v string) store.WindowState {
		k := e.key(win)
		k.ProcessorVersion = v
		st, err := e.st.GetWindow(ctx, k)
		if err != nil {
			return store.WindowState{}
		}
		return st
	}
	eventually(t, "every version's window to end", func() bool {
		for _, v := range versions[:3] {
			if !terminal(state(v)) {
				return false
			}
		}
		s := state("v9")
		return s.Status == store.WindowFailed && s.Attempts >= o.MaxAttempts
	})
	for len(claims) > 0 {
		claimed = append(claimed, <-claims)
	}

	bySynth := map[string]map[string]int{} // version → synthesizer → entries
	for _, v := range versions {
		page, err := e.st.ListEntries(ctx, e.ws, store.EntryQuery{ProcessorVersion: v, IncludeHidden: true, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range page.Items {
			if en.ProcessorVersion != v {
				continue
			}
			var meta struct {
				Synthesizer string `json:"synthesizer"`
			}
			if err := json.Unmarshal(en.AIMetadata, &meta); err != nil {
				t.Fatal(err)
			}
			if bySynth[v] == nil {
				bySynth[v] = map[string]int{}
			}
			bySynth[v][meta.Synthesizer]++
			if v == "v8" && en.Title != own.Title {
				t.Errorf("v8's entry %q, want its own synthesizer's %q", en.Title, own.Title)
			}
		}
	}
	for _, v := range []string{ids.DefaultProcessorVersion, "v7"} {
		if n := bySynth[v][rules.Name]; n == 0 || len(bySynth[v]) != 1 {
			t.Errorf("%s's entries by synthesizer: %v, want the worker's (rules) only", v, bySynth[v])
		}
	}
	if n := bySynth["v8"]["fixed"]; n != 1 || len(bySynth["v8"]) != 1 {
		t.Errorf("v8's entries by synthesizer: %v, want its own (fixed) only", bySynth["v8"])
	}
	if len(bySynth["v9"]) != 0 {
		t.Errorf("v9, whose settings failed, has entries: %v", bySynth["v9"])
	}
	if ownSum.count() != 1 || deploymentSum.count() != 2 {
		t.Errorf("summaries: v8's summarizer %d, the worker's %d; want 1 and 2 (v1 and v7)", ownSum.count(), deploymentSum.count())
	}
	for _, st := range claimed {
		want := o.PromptVersion
		if st.Key.ProcessorVersion == "v8" {
			want = "candidate-p8"
		}
		if st.Key.ProcessorVersion != "v9" && st.Meta.PromptVersion != want {
			t.Errorf("%s claimed with prompt version %q, want %q", st.Key.ProcessorVersion, st.Meta.PromptVersion, want)
		}
	}
	v9 := state("v9")
	if !strings.Contains(v9.Meta.Error, reasonVersionSettings) || !strings.Contains(v9.Meta.Error, "synthesis.openai.model is required") {
		t.Errorf("v9's diagnostics %q name neither the reason nor the cause", v9.Meta.Error)
	}
	if n := r.counter("larkline_synthesis_attempt_failures_total", "reason", reasonVersionSettings); n != float64(o.MaxAttempts) {
		t.Errorf("attempt failures for version_settings: %v, want %d", n, o.MaxAttempts)
	}
}
