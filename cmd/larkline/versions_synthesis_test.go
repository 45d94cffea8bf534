package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/openai"
	"github.com/larkline/larkline/processors/synthesis/rules"
)

// modelDeployment is a rules deployment whose model endpoint and key are configured
// for the versions that choose openai.
func modelDeployment() *config.Config {
	c := config.Default()
	c.Synthesis.OpenAI.BaseURL = "http://127.0.0.1:9/v1"
	c.Synthesis.OpenAI.APIKey = "not-a-secret-key"
	return c
}

// pinnedPrompt is c with synthesis.promptVersion set to v.
func pinnedPrompt(c *config.Config, v string) *config.Config {
	c.Synthesis.PromptVersion = v
	return c
}

// TestVersionStartSynthesisFlags: the synthesis flags of `versions start` record the
// configuration's synthesis with the flags in place; settings the configuration's
// rules refuse are refused at start, naming the key and the flag.
func TestVersionStartSynthesisFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const instructions = "Write an entry only for decisions the responders took."
	prompt, blank := filepath.Join(dir, "prompt.txt"), filepath.Join(dir, "blank.txt")
	if err := os.WriteFile(prompt, []byte(instructions), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blank, []byte("\n \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		args []string
		want *store.VersionSynthesis
		// refused: the key and flag named by the error
		refused []string
		// byFlag: refused by the flags' own rule, not the configuration's
		byFlag bool
	}{
		{name: "no flags", cfg: modelDeployment(), args: nil, want: nil},
		{name: "model candidate", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "model-b", "--prompt-version", "p2"},
			want: &store.VersionSynthesis{Synthesizer: "openai", PromptVersion: "p2",
				OpenAI: store.VersionOpenAI{Model: "model-b", MaxOutputTokens: 2048}, MaxEstimatedTokensPerChunk: 6000}},
		{name: "budget only", cfg: config.Default(), args: []string{"--max-tokens-per-chunk", "3000"},
			want: &store.VersionSynthesis{Synthesizer: "rules", PromptVersion: openai.DefaultPromptVersion, MaxEstimatedTokensPerChunk: 3000}},
		{name: "openai without an endpoint", cfg: config.Default(), args: []string{"--synthesizer", "openai", "--model", "m"},
			refused: []string{"synthesis.openai.baseURL", "synthesis.openai.apiKey"}},
		{name: "openai without a model", cfg: modelDeployment(), args: []string{"--synthesizer", "openai"},
			refused: []string{"synthesis.openai.model"}},
		{name: "unknown synthesizer", cfg: modelDeployment(), args: []string{"--synthesizer", "gpt"},
			refused: []string{"synthesis.synthesizer", "--synthesizer"}},
		{name: "negative output tokens", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "m", "--max-output-tokens", "-5"},
			refused: []string{"synthesis.openai.maxOutputTokens", "--max-output-tokens"}},
		{name: "bad prompt version", cfg: config.Default(), args: []string{"--prompt-version", "p 2!"},
			refused: []string{"synthesis.promptVersion", "--prompt-version"}},
		{name: "tiny chunk budget", cfg: config.Default(), args: []string{"--max-tokens-per-chunk", "10"},
			refused: []string{tl + "maxEstimatedTokensPerChunk", "--max-tokens-per-chunk"}},
		{name: "own prompt", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "m", "--prompt-version", "p3", "--prompt-file", prompt},
			want: &store.VersionSynthesis{Synthesizer: "openai", PromptVersion: "p3",
				OpenAI: store.VersionOpenAI{Model: "m", MaxOutputTokens: 2048, Instructions: instructions}, MaxEstimatedTokensPerChunk: 6000}},
		{name: "prompt for the rules", cfg: modelDeployment(), args: []string{"--prompt-version", "p3", "--prompt-file", prompt},
			refused: []string{"--prompt-file needs the openai synthesizer"}, byFlag: true},
		{name: "prompt without its own version", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "m", "--prompt-file", prompt},
			refused: []string{"--prompt-version of its own"}, byFlag: true},
		// a deployment that set its own prompt version: the package's is still refused for own instructions, by openai's rule
		{name: "prompt under the package's version", cfg: pinnedPrompt(modelDeployment(), "v1"), args: []string{"--synthesizer", "openai", "--model", "m",
			"--prompt-version", openai.DefaultPromptVersion, "--prompt-file", prompt}, refused: []string{"--prompt-file", "PromptVersion"}, byFlag: true},
		// on the default, the package's version is the configuration's (D40)
		{name: "prompt under the default version", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "m",
			"--prompt-version", openai.DefaultPromptVersion, "--prompt-file", prompt}, refused: []string{"--prompt-version of its own"}, byFlag: true},
		{name: "blank prompt", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "m", "--prompt-version", "p3", "--prompt-file", blank},
			refused: []string{"--prompt-file", "Instructions"}, byFlag: true},
		{name: "missing prompt file", cfg: modelDeployment(), args: []string{"--synthesizer", "openai", "--model", "m", "--prompt-version", "p3",
			"--prompt-file", filepath.Join(dir, "none.txt")}, refused: []string{"--prompt-file", "none.txt"}, byFlag: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("versions start", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := addSynthesisFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			f.given(fs)
			got, err := f.settings(tc.cfg)
			if tc.refused != nil {
				t.Logf("refused: %v", err)
				if !errors.Is(err, errUsage) || (!tc.byFlag && !errors.Is(err, config.ErrInvalid)) {
					t.Fatalf("settings: %v, want a usage error with the configuration's problems", err)
				}
				for _, w := range tc.refused {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal does not name %s:\n%v", w, err)
					}
				}
				if strings.Contains(err.Error(), "not-a-secret-key") {
					t.Errorf("the refusal prints the API key:\n%v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("settings: %v", err)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("settings %+v, want %+v", got, tc.want)
			}
		})
	}
}

// fakeVersions is the registry as versionSettings reads it; it counts the reads.
type fakeVersions struct {
	mu    sync.Mutex
	rows  map[string]store.ProcessorVersion
	err   error
	reads int
}

func (f *fakeVersions) GetVersion(_ context.Context, name string) (store.ProcessorVersion, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return store.ProcessorVersion{}, f.err
	}
	v, ok := f.rows[name]
	if !ok {
		return store.ProcessorVersion{}, store.ErrNotFound
	}
	return v, nil
}

func (f *fakeVersions) set(v store.ProcessorVersion) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[v.Name] = v
}

// TestVersionSettingsSelection: the synthesis workers' per-version selection. A
// version with settings of its own gets a synthesizer built from them (once: later
// windows reuse it); a version without, and one the registry does not hold, the
// deployment's (ok false), the unknown one read again until it appears; settings the
// deployment cannot build (no model endpoint) and a failing registry read are errors.
func TestVersionSettingsSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := &fakeVersions{rows: map[string]store.ProcessorVersion{
		"v1":     {Name: "v1"},
		"model":  {Name: "model", Synthesis: &store.VersionSynthesis{Synthesizer: "openai", PromptVersion: "p2", OpenAI: store.VersionOpenAI{Model: "model-b"}}},
		"budget": {Name: "budget", Synthesis: &store.VersionSynthesis{Synthesizer: "rules", PromptVersion: "v1", MaxEstimatedTokensPerChunk: 3000}},
		"prompted": {Name: "prompted", Synthesis: &store.VersionSynthesis{Synthesizer: "openai", PromptVersion: "p3",
			OpenAI: store.VersionOpenAI{Model: "model-b", Instructions: "Write only decisions."}}},
		"misprompted": {Name: "misprompted", Synthesis: &store.VersionSynthesis{Synthesizer: "openai", PromptVersion: openai.DefaultPromptVersion,
			OpenAI: store.VersionOpenAI{Model: "model-b", Instructions: "Write only decisions."}}},
	}}
	vs := &versionSettings{base: synthesizerOf(modelDeployment()), store: reg, log: slog.New(slog.DiscardHandler)}

	for _, tc := range []struct {
		version    string
		own        bool
		synth      string // the synthesizer's type: openai or rules
		prompt     string
		budget     int
		readsAfter int // registry reads so far, after this lookup
	}{
		{version: "v1", own: false, readsAfter: 1},
		{version: "v1", own: false, readsAfter: 1}, // cached
		{version: "model", own: true, synth: "openai", prompt: "p2", readsAfter: 2},
		{version: "model", own: true, synth: "openai", prompt: "p2", readsAfter: 2},
		{version: "budget", own: true, synth: "rules", prompt: "v1", budget: 3000, readsAfter: 3},
		{version: "prompted", own: true, synth: "openai", prompt: "p3", readsAfter: 4},
		{version: "unknown", own: false, readsAfter: 5},
		{version: "unknown", own: false, readsAfter: 6}, // not cached: it may appear
	} {
		s, own, err := vs.Settings(ctx, tc.version)
		if err != nil {
			t.Fatalf("%s: %v", tc.version, err)
		}
		if own != tc.own || reg.reads != tc.readsAfter {
			t.Fatalf("%s: own %v after %d reads, want %v after %d", tc.version, own, reg.reads, tc.own, tc.readsAfter)
		}
		if !own {
			continue
		}
		switch s.Synthesizer.(type) {
		case *openai.Client:
			if tc.synth != "openai" {
				t.Errorf("%s: an openai client, want %s", tc.version, tc.synth)
			}
		case *rules.Synthesizer:
			if tc.synth != "rules" {
				t.Errorf("%s: the rules, want %s", tc.version, tc.synth)
			}
		default:
			t.Errorf("%s: synthesizer %T", tc.version, s.Synthesizer)
		}
		if s.Summarizer == nil || s.PromptVersion != tc.prompt || s.MaxEstimatedTokensPerChunk != tc.budget || s.ChunkTimeout <= 0 {
			t.Errorf("%s: settings %+v", tc.version, s)
		}
	}

	// the unknown version appears with settings of its own
	reg.set(store.ProcessorVersion{Name: "unknown", Synthesis: &store.VersionSynthesis{Synthesizer: "rules", PromptVersion: "p9"}})
	if s, own, err := vs.Settings(ctx, "unknown"); err != nil || !own || s.PromptVersion != "p9" {
		t.Errorf("unknown after it appeared: %+v %v %v", s, own, err)
	}

	// instructions under the package's prompt version are refused by the client
	if _, _, err := vs.Settings(ctx, "misprompted"); !errors.Is(err, openai.ErrInvalidOptions) || !strings.Contains(err.Error(), "PromptVersion") {
		t.Errorf("building misprompted: %v, want openai's ErrInvalidOptions naming PromptVersion", err)
	}
	// a deployment without the model endpoint cannot build an openai version
	bare := &versionSettings{base: synthesizerOf(config.Default()), store: reg, log: slog.New(slog.DiscardHandler)}
	if _, _, err := bare.Settings(ctx, "model"); !errors.Is(err, openai.ErrInvalidOptions) || !strings.Contains(err.Error(), "processor version model") {
		t.Errorf("building model without an endpoint: %v, want openai's ErrInvalidOptions naming the version", err)
	}
	// a failing registry read is an error, not the deployment's settings
	down := &versionSettings{base: synthesizerOf(modelDeployment()), store: &fakeVersions{err: errors.New("connection refused")}, log: slog.New(slog.DiscardHandler)}
	if _, own, err := down.Settings(ctx, "model"); err == nil || own {
		t.Errorf("with the registry down: own %v, error %v; want an error", own, err)
	}
}
