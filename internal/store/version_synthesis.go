package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// VersionSynthesis is a processor version's own synthesis settings (decisions D31),
// recorded when the version starts and never changed: every window of the version is
// synthesized with them, whether it is serving or a candidate. The fields are the
// configuration keys they stand in for (the JSON names are the keys' last parts);
// what is not here (the model endpoint, its API key, timeouts) stays the
// deployment's. The store checks only their size; the synthesis rules are checked
// by `larkline versions start` through the configuration's own validation.
type VersionSynthesis struct {
	// Synthesizer is synthesis.synthesizer: rules or openai.
	Synthesizer string `json:"synthesizer"`
	// PromptVersion is synthesis.promptVersion.
	PromptVersion string `json:"promptVersion,omitempty"`
	// OpenAI holds the synthesis.openai keys a version may set.
	OpenAI VersionOpenAI `json:"openai,omitzero"`
	// MaxEstimatedTokensPerChunk is services.workspace.timeline.lark.maxEstimatedTokensPerChunk.
	MaxEstimatedTokensPerChunk int `json:"maxEstimatedTokensPerChunk,omitempty"`
}

// VersionOpenAI is the part of synthesis.openai a version records.
type VersionOpenAI struct {
	// Model is synthesis.openai.model.
	Model string `json:"model,omitempty"`
	// MaxOutputTokens is synthesis.openai.maxOutputTokens.
	MaxOutputTokens int `json:"maxOutputTokens,omitempty"`
	// Instructions replace the synthesis prompt's instructions (openai
	// Options.Instructions); "" keeps the package's. Not a key of the configuration:
	// `versions start --prompt-file` reads them.
	Instructions string `json:"instructions,omitempty"`
}

// MaxVersionInstructions bounds VersionOpenAI.Instructions in the registry.
const MaxVersionInstructions = 64 << 10

// InstructionsHash is a short SHA-256 of the instructions; "" when there are none.
func (o VersionOpenAI) InstructionsHash() string {
	if o.Instructions == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(o.Instructions))
	return hex.EncodeToString(sum[:6])
}

func (s *VersionSynthesis) validate() error {
	switch {
	case s.Synthesizer == "" || len(s.Synthesizer) > 32:
		return fmt.Errorf("synthesis settings: synthesizer %q must be 1..32 bytes", s.Synthesizer)
	case len(s.PromptVersion) > 64:
		return fmt.Errorf("synthesis settings: prompt version must be at most 64 bytes")
	case len(s.OpenAI.Model) > 256:
		return fmt.Errorf("synthesis settings: model must be at most 256 bytes")
	case len(s.OpenAI.Instructions) > MaxVersionInstructions:
		return fmt.Errorf("synthesis settings: instructions must be at most %d bytes", MaxVersionInstructions)
	case s.OpenAI.MaxOutputTokens < 0 || s.MaxEstimatedTokensPerChunk < 0:
		return fmt.Errorf("synthesis settings: token budgets must not be negative")
	}
	return nil
}

// Hash is a short SHA-256 of the settings (their JSON), to tell two versions'
// settings apart at a glance.
func (s *VersionSynthesis) Hash() string {
	b, err := json.Marshal(s)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
