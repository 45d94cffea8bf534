package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis"
	"github.com/larkline/larkline/processors/synthesis/openai"
	"github.com/larkline/larkline/processors/synthesis/rules"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// A processor version's own synthesis (decisions D31): `versions start` records the
// settings its flags give, checked by the configuration's own rules against this
// deployment; the synthesis workers build each such version's synthesizer once and
// use it for the version's windows. The model endpoint and its API key are never a
// version's: they stay the deployment's (configuration or environment), never in
// Postgres.

// synthesisFlags are the `versions start` flags of a version's own synthesis, each
// the configuration key it stands in for.
type synthesisFlags struct {
	synthesizer, model, promptVersion, promptFile *string
	maxOutputTokens, maxTokensPerChunk            *int
	set                                           map[string]bool // flag names given
}

// synthesisFlagKeys maps each flag onto its configuration key.
var synthesisFlagKeys = map[string]string{
	"synthesizer":          "synthesis.synthesizer",
	"model":                "synthesis.openai.model",
	"prompt-version":       "synthesis.promptVersion",
	"max-output-tokens":    "synthesis.openai.maxOutputTokens",
	"max-tokens-per-chunk": tl + "maxEstimatedTokensPerChunk",
	"prompt-file":          "", // no key: the instructions are a version's only
}

func addSynthesisFlags(fs *flag.FlagSet) *synthesisFlags {
	return &synthesisFlags{
		synthesizer:       fs.String("synthesizer", "", "the version's own synthesizer, rules or openai (synthesis.synthesizer); any of these synthesis flags records the version's own synthesis settings, the others taken from the configuration now"),
		model:             fs.String("model", "", "the version's own model (synthesis.openai.model); the endpoint and API key stay the deployment's"),
		promptVersion:     fs.String("prompt-version", "", "the version's own prompt version (synthesis.promptVersion)"),
		maxOutputTokens:   fs.Int("max-output-tokens", 0, "the version's own output token limit per model call (synthesis.openai.maxOutputTokens)"),
		maxTokensPerChunk: fs.Int("max-tokens-per-chunk", 0, "the version's own estimated prompt budget per chunk ("+tl+"maxEstimatedTokensPerChunk)"),
		promptFile:        fs.String("prompt-file", "", "a file of the version's own synthesis prompt instructions, in place of the built-in ones (openai only; needs its own --prompt-version)"),
	}
}

// given records which of the flags the command line set (after fs.Parse).
func (f *synthesisFlags) given(fs *flag.FlagSet) {
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) {
		if _, ok := synthesisFlagKeys[fl.Name]; ok {
			f.set[fl.Name] = true
		}
	})
}

// settings returns the version's own synthesis settings: the configuration's now,
// with the flags given; nil when no flag was given (the version follows the
// deployment's configuration). They are checked by the configuration's own rules
// (every stage's Options.Check, openai's when the synthesizer is openai) on the
// configuration as the version would run it; a problem names the flag.
func (f *synthesisFlags) settings(cfg *config.Config) (*store.VersionSynthesis, error) {
	if f == nil || len(f.set) == 0 {
		return nil, nil
	}
	s := deploymentSynthesis(cfg)
	if f.set["synthesizer"] {
		s.Synthesizer = *f.synthesizer
	}
	if f.set["model"] {
		s.OpenAI.Model = *f.model
	}
	if f.set["prompt-version"] {
		s.PromptVersion = *f.promptVersion
	}
	if f.set["max-output-tokens"] {
		s.OpenAI.MaxOutputTokens = *f.maxOutputTokens
	}
	if f.set["max-tokens-per-chunk"] {
		s.MaxEstimatedTokensPerChunk = *f.maxTokensPerChunk
	}
	if f.set["prompt-file"] {
		if err := f.instructions(cfg, s); err != nil {
			return nil, err
		}
	}
	if s.Synthesizer != string(config.SynthesizerOpenAI) {
		s.OpenAI = store.VersionOpenAI{} // the rules call no model
	}
	vc := versionConfig(cfg, s)
	if err := validateConfig(vc); err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			for i, p := range ce.Problems {
				for name, key := range synthesisFlagKeys {
					if p.Field == key && f.set[name] {
						ce.Problems[i].Source = "--" + name
					}
				}
			}
		}
		return nil, fmt.Errorf("%w: the version's synthesis settings are refused: %w", errUsage, err)
	}
	if s.OpenAI.Instructions != "" {
		// the model client's own rules on them (size, UTF-8, their own prompt version)
		o := openaiOptions(vc).opts
		o.Instructions = s.OpenAI.Instructions
		if err := o.Check(); err != nil {
			return nil, fmt.Errorf("%w: the version's synthesis settings are refused: --prompt-file %s: %w", errUsage, *f.promptFile, err)
		}
	}
	return s, nil
}

// instructions reads --prompt-file into s: only for the openai synthesizer, and with
// a --prompt-version of its own (the entries record it as the prompt that wrote them).
func (f *synthesisFlags) instructions(cfg *config.Config, s *store.VersionSynthesis) error {
	switch {
	case s.Synthesizer != string(config.SynthesizerOpenAI):
		return fmt.Errorf("%w: --prompt-file needs the openai synthesizer (--synthesizer openai): the rules take no prompt", errUsage)
	case !f.set["prompt-version"] || *f.promptVersion == cfg.Synthesis.PromptVersion:
		return fmt.Errorf("%w: --prompt-file needs a --prompt-version of its own, other than the configuration's %q: entries record it as the prompt that wrote them",
			errUsage, cfg.Synthesis.PromptVersion)
	}
	b, err := os.ReadFile(*f.promptFile)
	if err != nil {
		return fmt.Errorf("%w: --prompt-file: %w", errUsage, err)
	}
	if len(b) > openai.MaxInstructionsBytes {
		return fmt.Errorf("%w: --prompt-file %s: %d bytes, at most %d", errUsage, *f.promptFile, len(b), openai.MaxInstructionsBytes)
	}
	s.OpenAI.Instructions = string(b)
	return nil
}

// deploymentSynthesis is the configuration's synthesis, as a version records it.
func deploymentSynthesis(cfg *config.Config) *store.VersionSynthesis {
	return &store.VersionSynthesis{Synthesizer: string(cfg.Synthesis.Synthesizer), PromptVersion: cfg.Synthesis.PromptVersion,
		OpenAI:                     store.VersionOpenAI{Model: cfg.Synthesis.OpenAI.Model, MaxOutputTokens: cfg.Synthesis.OpenAI.MaxOutputTokens},
		MaxEstimatedTokensPerChunk: cfg.Services.Workspace.Timeline.Lark.MaxEstimatedTokensPerChunk}
}

// versionConfig is cfg with a version's synthesis settings in place of its own.
func versionConfig(cfg *config.Config, s *store.VersionSynthesis) *config.Config {
	c := *cfg
	c.Synthesis.Synthesizer = config.SynthesizerKind(s.Synthesizer)
	c.Synthesis.PromptVersion = s.PromptVersion
	if s.OpenAI.Model != "" {
		c.Synthesis.OpenAI.Model = s.OpenAI.Model
	}
	if s.OpenAI.MaxOutputTokens != 0 {
		c.Synthesis.OpenAI.MaxOutputTokens = s.OpenAI.MaxOutputTokens
	}
	if s.MaxEstimatedTokensPerChunk != 0 {
		c.Services.Workspace.Timeline.Lark.MaxEstimatedTokensPerChunk = s.MaxEstimatedTokensPerChunk
	}
	return &c
}

// describeSynthesis is how `versions list` shows a version's synthesis: no secret,
// no endpoint.
func describeSynthesis(s *store.VersionSynthesis) string {
	if s == nil {
		return "the deployment's configuration"
	}
	parts := []string{s.Synthesizer}
	if s.Synthesizer == string(config.SynthesizerOpenAI) {
		parts = append(parts, "model "+s.OpenAI.Model, fmt.Sprintf("max output tokens %d", s.OpenAI.MaxOutputTokens))
		if h := s.OpenAI.InstructionsHash(); h != "" {
			parts = append(parts, "prompt instructions "+h)
		} else {
			parts = append(parts, "built-in prompt")
		}
	}
	parts = append(parts, "prompt version "+s.PromptVersion, fmt.Sprintf("chunk budget %d tokens", s.MaxEstimatedTokensPerChunk),
		"settings "+s.Hash())
	return strings.Join(parts, ", ")
}

// synthesisJSON is a version's own synthesis in `versions list --json`: its
// settings, the prompt instructions as their hash.
type synthesisJSON struct {
	Synthesizer   string `json:"synthesizer"`
	PromptVersion string `json:"promptVersion,omitempty"`
	OpenAI        struct {
		Model            string `json:"model,omitempty"`
		MaxOutputTokens  int    `json:"maxOutputTokens,omitempty"`
		InstructionsHash string `json:"instructionsHash,omitempty"`
	} `json:"openai,omitzero"`
	MaxEstimatedTokensPerChunk int `json:"maxEstimatedTokensPerChunk,omitempty"`
}

func synthesisView(s *store.VersionSynthesis) *synthesisJSON {
	if s == nil {
		return nil
	}
	j := &synthesisJSON{Synthesizer: s.Synthesizer, PromptVersion: s.PromptVersion, MaxEstimatedTokensPerChunk: s.MaxEstimatedTokensPerChunk}
	j.OpenAI.Model, j.OpenAI.MaxOutputTokens, j.OpenAI.InstructionsHash = s.OpenAI.Model, s.OpenAI.MaxOutputTokens, s.OpenAI.InstructionsHash()
	return j
}

// newSynthesizer builds the synthesizer and summarizer s says, the model client
// with instructions in place of its built-in ones when given. A nil logger or
// registry leaves the model client's logs or metrics out.
func newSynthesizer(s synthesizerOptions, instructions string, log *slog.Logger, reg *prometheus.Registry) (synth.Synthesizer, synth.Summarizer, error) {
	if s.openAI {
		o := s.openai
		o.Logger, o.Registry, o.Instructions = log, reg, instructions
		c, err := openai.New(o)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}
	r, err := rules.New(rules.Options{})
	if err != nil {
		return nil, nil, err
	}
	return r, r, nil
}

// versionSettings gives the synthesis workers each processor version's own synthesis
// (synthesis.VersionSettings): read from the registry when a version is first seen,
// built once and kept (a version's settings never change). A version without own
// settings, or one the registry does not hold, synthesizes with the deployment's.
type versionSettings struct {
	base  synthesizerOptions // the deployment's
	store interface {
		GetVersion(ctx context.Context, name string) (store.ProcessorVersion, error)
	}
	log *slog.Logger

	mu    sync.Mutex
	known map[string]versionSynthesis
}

type versionSynthesis struct {
	s   synthesis.Settings
	own bool
}

var _ synthesis.VersionSettings = (*versionSettings)(nil)

// Settings implements synthesis.VersionSettings.
func (v *versionSettings) Settings(ctx context.Context, version string) (synthesis.Settings, bool, error) {
	v.mu.Lock()
	k, ok := v.known[version]
	v.mu.Unlock()
	if ok {
		return k.s, k.own, nil
	}
	pv, err := v.store.GetVersion(ctx, version)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// not cached: the registry may hold it later, with settings of its own
		return synthesis.Settings{}, false, nil
	case err != nil:
		return synthesis.Settings{}, false, fmt.Errorf("reading processor version %s: %w", version, err)
	}
	if pv.Synthesis != nil {
		s, err := v.build(pv.Synthesis)
		if err != nil {
			return synthesis.Settings{}, false, fmt.Errorf("building the synthesis of processor version %s (settings %s) from this deployment's configuration: %w",
				version, pv.Synthesis.Hash(), err)
		}
		k = versionSynthesis{s: s, own: true}
		v.log.Info("processor version synthesizes with its own settings", "processor_version", version,
			"synthesizer", pv.Synthesis.Synthesizer, "prompt_version", pv.Synthesis.PromptVersion, "settings_hash", pv.Synthesis.Hash())
	}
	v.mu.Lock()
	if v.known == nil {
		v.known = map[string]versionSynthesis{}
	}
	v.known[version] = k
	v.mu.Unlock()
	return k.s, k.own, nil
}

// build makes a version's synthesizer from its settings and this deployment's
// endpoint and key. Its model client exports no metrics of its own (the worker's
// larkline_synthesis_* count its calls and tokens): two clients cannot register the
// same families on one registry.
func (v *versionSettings) build(s *store.VersionSynthesis) (synthesis.Settings, error) {
	vs := v.base.with(s)
	syn, sum, err := newSynthesizer(vs, s.OpenAI.Instructions, v.log, nil)
	if err != nil {
		return synthesis.Settings{}, err
	}
	set := synthesis.Settings{Synthesizer: syn, Summarizer: sum, PromptVersion: s.PromptVersion,
		MaxEstimatedTokensPerChunk: s.MaxEstimatedTokensPerChunk, ChunkTimeout: vs.chunkTimeout()}
	return set, set.Check()
}
