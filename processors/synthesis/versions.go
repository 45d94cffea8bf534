package synthesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// reasonVersionSettings is the attempt failure reason of a window whose processor
// version's own synthesis could not be resolved (larkline_synthesis_attempt_failures_total).
const reasonVersionSettings = "version_settings"

// ErrVersionSettings is wrapped by the attempt failure of a window whose processor
// version's own synthesis could not be resolved or is invalid.
var ErrVersionSettings = errors.New("synthesis: processor version's synthesis settings")

// Settings is the synthesis of one processor version that has its own (decisions
// D31): what drafts its windows and writes its summaries, instead of the Options'.
type Settings struct {
	// Synthesizer drafts the version's windows. Required.
	Synthesizer synth.Synthesizer
	// Summarizer writes the version's summaries; nil turns them off for it.
	Summarizer synth.Summarizer
	// PromptVersion is recorded with the version's claimed windows (Options.PromptVersion).
	PromptVersion string
	// MaxEstimatedTokensPerChunk is the version's chunk budget; 0 is the Options'.
	MaxEstimatedTokensPerChunk int
	// ChunkTimeout bounds one Synthesize call of the version; 0 is the Options'.
	ChunkTimeout time.Duration
}

// Check reports every value of s that breaks the worker's rules, as an
// *options.Error wrapping ErrInvalidOptions, or nil.
func (s Settings) Check() error {
	p := new(options.Problems)
	if s.Synthesizer == nil {
		p.Add("Synthesizer", nil, "is required")
	}
	if len(s.PromptVersion) > 64 {
		p.Add("PromptVersion", s.PromptVersion, "must be at most 64 bytes")
	}
	if s.MaxEstimatedTokensPerChunk != 0 && s.MaxEstimatedTokensPerChunk < minTokensPerChunk {
		p.Add("MaxEstimatedTokensPerChunk", s.MaxEstimatedTokensPerChunk, "must be at least %d", minTokensPerChunk)
	}
	if s.ChunkTimeout < 0 || s.ChunkTimeout > time.Hour {
		p.Add("ChunkTimeout", s.ChunkTimeout, "must be within [0, 1h]")
	}
	return p.Err(ErrInvalidOptions)
}

// VersionSettings resolves the synthesis of a processor version (Options.Versions).
type VersionSettings interface {
	// Settings returns the version's own synthesis; ok is false for a version that has
	// none (it synthesizes with the Options'). An error fails the window's attempt
	// (reason version_settings), which is retried like any failed attempt.
	Settings(ctx context.Context, version string) (s Settings, ok bool, err error)
}

// jobSynthesis is what synthesizes one job: the job's version's own settings, or the
// Options' when it has none.
type jobSynthesis struct {
	syn          synth.Synthesizer
	sum          synth.Summarizer
	prompt       string
	budget       int
	chunkTimeout time.Duration
}

// defaultSynthesis is the Options' synthesis.
func (o *Options) defaultSynthesis() *jobSynthesis {
	return &jobSynthesis{syn: o.Synthesizer, sum: o.Summarizer, prompt: o.PromptVersion,
		budget: o.MaxEstimatedTokensPerChunk, chunkTimeout: o.ChunkTimeout}
}

// resolveSynthesis sets j.syn to the synthesis of the job's processor version. On an
// error j.syn is the Options' (for the claim) and the error, wrapping
// ErrVersionSettings, is the attempt's failure.
func (w *Worker) resolveSynthesis(ctx context.Context, j *job) error {
	j.syn = w.o.defaultSynthesis()
	if w.o.Versions == nil {
		return nil
	}
	s, ok, err := w.o.Versions.Settings(ctx, j.processorVersion())
	if err == nil && ok {
		err = s.Check()
	}
	if err != nil {
		return failAttempt(reasonVersionSettings, fmt.Errorf("%w of %s: %w", ErrVersionSettings, j.processorVersion(), err))
	}
	if !ok {
		return nil
	}
	j.syn = &jobSynthesis{syn: s.Synthesizer, sum: s.Summarizer, prompt: s.PromptVersion,
		budget: w.o.MaxEstimatedTokensPerChunk, chunkTimeout: w.o.ChunkTimeout}
	if s.MaxEstimatedTokensPerChunk > 0 {
		j.syn.budget = s.MaxEstimatedTokensPerChunk
	}
	if s.ChunkTimeout > 0 {
		j.syn.chunkTimeout = s.ChunkTimeout
	}
	return nil
}

// synthesisOf is the job's synthesis, the Options' before it was resolved.
func (w *Worker) synthesisOf(j *job) *jobSynthesis {
	if j.syn == nil {
		return w.o.defaultSynthesis()
	}
	return j.syn
}

// promptVersion is the prompt version the job's claims record.
func (j *job) promptVersion(o *Options) string {
	if j.syn == nil {
		return o.PromptVersion
	}
	return j.syn.prompt
}
