package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
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

// A processor version's own synthesis (decisions D29): `versions start` records the
// settings its flags give, checked by the configuration's own rules against this
// deployment; the synthesis workers build each such version's synthesizer once and
// use it for the version's windows. The model endpoint and its API key are never a
// version's: they stay the deployment's (configuration or environment), never in
// Postgres.

// synthesisFlags are the `versions start` flags of a version's own synthesis, each
// the configuration key it stands in for.
type synthesisFlags struct {
	synthesizer, model, promptVersion  *string
	maxOutputTokens, maxTokensPerChunk *int
	set                                map[string]bool // flag names given
}

// synthesisFlagKeys maps each flag onto its configuration key.
var synthesisFlagKeys = map[string]string{
	"synthesizer":          "synthesis.synthesizer",
	"model":                "synthesis.openai.model",
	"prompt-version":       "synthesis.promptVersion",
	"max-output-tokens":    "synthesis.openai.maxOutputTokens",
	"max-tokens-per-chunk": tl + "maxEstimatedTokensPerChunk",
}

func addSynthesisFlags(fs *flag.FlagSet) *synthesisFlags {
	return &synthesisFlags{
		synthesizer:       fs.String("synthesizer", "", "the version's own synthesizer, rules or openai (synthesis.synthesizer); any of these synthesis flags records the version's own synthesis settings, the others taken from the configuration now"),
		model:             fs.String("model", "", "the version's own model (synthesis.openai.model); the endpoint and API key stay the deployment's"),
		promptVersion:     fs.String("prompt-version", "", "the version's own prompt version (synthesis.promptVersion)"),
		maxOutputTokens:   fs.Int("max-output-tokens", 0, "the version's own output token limit per model call (synthesis.openai.maxOutputTokens)"),
		maxTokensPerChunk: fs.Int("max-tokens-per-chunk", 0, "the version's own estimated prompt budget per chunk ("+tl+"maxEstimatedTokensPerChunk)"),
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
	if len(f.set) == 0 {
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
	if s.Synthesizer != string(config.SynthesizerOpenAI) {
		s.OpenAI = store.VersionOpenAI{} // the rules call no model
	}
	if err := validateConfig(versionConfig(cfg, s)); err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			for i, p := range ce.Problems {
				for name, key := range synthesisFlagKeys {
					if p.Path == key && f.set[name] {
						ce.Problems[i].Source = "--" + name
					}
				}
			}
		}
		return nil, fmt.Errorf("%w: the version's synthesis settings are refused: %w", errUsage, err)
	}
	return s, nil
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
	}
	parts = append(parts, "prompt version "+s.PromptVersion, fmt.Sprintf("chunk budget %d tokens", s.MaxEstimatedTokensPerChunk),
		"settings "+s.Hash())
	return strings.Join(parts, ", ")
}

// newSynthesizer builds the synthesizer and summarizer cfg configures. A nil logger
// or registry leaves the model client's logs or metrics out.
func newSynthesizer(cfg *config.Config, log *slog.Logger, reg *prometheus.Registry) (synth.Synthesizer, synth.Summarizer, error) {
	if cfg.Synthesis.Synthesizer == config.SynthesizerOpenAI {
		o := openaiOptions(cfg)
		o.Logger, o.Registry = log, reg
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
	cfg   *config.Config
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
	vc := versionConfig(v.cfg, s)
	syn, sum, err := newSynthesizer(vc, v.log, nil)
	if err != nil {
		return synthesis.Settings{}, err
	}
	set := synthesis.Settings{Synthesizer: syn, Summarizer: sum, PromptVersion: s.PromptVersion,
		MaxEstimatedTokensPerChunk: s.MaxEstimatedTokensPerChunk, ChunkTimeout: chunkTimeout(vc)}
	return set, set.Check()
}
