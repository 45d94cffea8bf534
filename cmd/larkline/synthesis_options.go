package main

import (
	"time"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis"
	"github.com/larkline/larkline/processors/synthesis/openai"
)

// synthesisOptions: the synthesis worker.
func synthesisOptions(cfg *config.Config) mapped[synthesis.Options] {
	l, t := cfg.Services.Workspace.Timeline.Lark, cfg.Kafka.Topics
	m, o := newMapped[synthesis.Options]()
	nest(m, &o.Kafka, kafkaOptions(cfg, "synthesis"))
	set(m, &o.Group, "kafka.groupPrefix", groupName(cfg, groupSynthesis))
	set(m, &o.Topic, "kafka.topics.windowsClosed", t.WindowsClosed)
	set(m, &o.DeadLetterTopic, "kafka.topics.deadLetter", t.DeadLetter)
	set(m, &o.PromptVersion, "synthesis.promptVersion", cfg.Synthesis.PromptVersion)
	set(m, &o.ContextLookback, tl+"synthesisContextLookback", l.SynthesisContextLookback)
	set(m, &o.StaleTimeout, tl+"synthesisStaleTimeout", l.SynthesisStaleTimeout)
	set(m, &o.MaxAttempts, tl+"synthesisWindowMaxAttempts", l.SynthesisWindowMaxAttempts)
	set(m, &o.ChunkTimeout, "synthesis.openai.timeout", synthesizerOf(cfg).chunkTimeout())
	set(m, &o.EvidenceWait, "synthesis.evidenceWait", cfg.Synthesis.EvidenceWait)
	set(m, &o.ScanInterval, tl+"synthesisScanInterval", l.SynthesisScanInterval)
	set(m, &o.EvidenceBatchLimit, tl+"evidenceBatchLimit", l.EvidenceBatchLimit)
	set(m, &o.MaxEstimatedTokensPerChunk, tl+"maxEstimatedTokensPerChunk", l.MaxEstimatedTokensPerChunk)
	set(m, &o.MaxConcurrentSynthesis, tl+"maxConcurrentSynthesis", l.MaxConcurrentSynthesis)
	return *m
}

// synthesizerOptions: the synthesizer, and the model client a processor version's
// own settings (D31) are laid over.
type synthesizerOptions struct {
	openAI bool           // synthesis.synthesizer is openai; else the rules
	openai openai.Options // also while the rules synthesize: a version may call the model
}

func synthesizerOf(cfg *config.Config) synthesizerOptions {
	return synthesizerOptions{openAI: cfg.Synthesis.Synthesizer == config.SynthesizerOpenAI, openai: openaiOptions(cfg).opts}
}

// chunkTimeout bounds one Synthesize call: the model client's own retries of its
// request timeout, with a margin; the rules run in microseconds.
func (s synthesizerOptions) chunkTimeout() time.Duration {
	if !s.openAI {
		return 10 * time.Second
	}
	return time.Duration(*s.openai.MaxRetries+1)*s.openai.Timeout + 10*time.Second
}

// with lays a version's own synthesis settings over s.
func (s synthesizerOptions) with(v *store.VersionSynthesis) synthesizerOptions {
	s.openAI = v.Synthesizer == string(config.SynthesizerOpenAI)
	s.openai.PromptVersion = v.PromptVersion
	if v.OpenAI.Model != "" {
		s.openai.Model = v.OpenAI.Model
	}
	if v.OpenAI.MaxOutputTokens != 0 {
		s.openai.MaxOutputTokens = v.OpenAI.MaxOutputTokens
	}
	return s
}
