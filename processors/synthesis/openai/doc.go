// Package openai is a synth.Synthesizer and synth.Summarizer backed by any
// OpenAI-compatible chat-completions endpoint (OpenAI, Azure-style gateways, vLLM,
// llama.cpp server, Ollama, LiteLLM, …): POST {BaseURL}/chat/completions.
//
// A chunk is sent as redacted, pseudonymised JSON framed as untrusted data (issue
// #29), asking for strict structured output (falling back to json_object where the
// endpoint refuses json_schema). Every answer must pass synth.Validate; an invalid one
// is retried with the error fed back, an unavailable endpoint with backoff and
// Retry-After, and the errors end as synth.ErrInvalidOutput, synth.ErrUnavailable or
// synth.ErrRejected (*StatusError), a cancellation as ctx's own error.
//
// Logs carry ids, attempts, status codes and token counts, never message text,
// prompts, answers or the API key. docs/operations.md ("How the model synthesizer
// calls an endpoint") has what is sent, what is accepted, every retry rule and the
// privacy rules.
package openai
