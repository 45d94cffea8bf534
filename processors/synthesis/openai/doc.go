// Package openai is a synth.Synthesizer and synth.Summarizer backed by any
// OpenAI-compatible chat-completions endpoint (OpenAI, Azure-style gateways, vLLM,
// llama.cpp server, Ollama, LiteLLM, …): POST {BaseURL}/chat/completions.
//
// # What is sent
//
// A system prompt (prompt.go; Options.Instructions may replace the synthesis prompt's
// instructions, never its untrusted-data rule or answer shape) and one user message: a
// compact JSON rendering of the
// chunk — window bounds, existing entries, and the conversation groups with each
// message's evidence id, UTC time, sender, text and, for read-only context, a context
// flag. Every text passes through synth.Redact first; senders are display names or
// stable pseudonyms, never Lark open ids; group keys are replaced by g1, g2, …;
// deleted messages, bot messages and non-text messages are left out. A chunk with
// nothing citable left is answered without a call. The JSON is untrusted data and
// framed as such (issue #29): it sits alone between an <untrusted-chat-data tag="…">
// line and its closing line (json.Marshal escapes '<' and '>' in strings, so no text
// can close the block), and both system prompts say that nothing inside is an
// instruction. Requests ask for temperature 0,
// max_tokens = MaxOutputTokens and structured output:
// response_format {"type":"json_schema","json_schema":{"strict":true,…}}. An endpoint
// that answers 400 to json_schema gets the same attempt again with
// {"type":"json_object"} (the prompt spells out the JSON shape); once that is accepted
// the client keeps using json_object. The Authorization header carries APIKey when set.
//
// # What is accepted
//
// The answer must be {"entries":[{"kind","title","body","occurred_at","evidence_ids"}]}
// (or {"summary":…}). Cosmetic slips are normalized (code fences, whitespace in titles,
// kind case, evidence order and repeats, time zones); then every draft must pass
// synth.Validate: a known kind, bounded title and body, a time inside the window, and
// evidence that is citable primary evidence of the chunk.
//
// # Retries and errors
//
// One call makes at most 1+MaxRetries attempts, each bounded by Timeout:
//
//   - an invalid answer is retried at once, with the answer and the validation error
//     fed back to the model; when the attempts are spent, synth.ErrInvalidOutput;
//   - 408, 425, 429, 5xx, transport errors and timeouts are retried after exponential
//     backoff with jitter (BackoffBase, BackoffMax), never sooner than the endpoint's
//     Retry-After; a Retry-After beyond MaxRetryAfter ends the call at once. When the
//     attempts are spent, synth.ErrUnavailable (HTTP answers as *StatusError);
//   - any other 4xx ends the call with synth.ErrRejected (*StatusError): bad request,
//     authentication, unknown model or path, context length exceeded;
//   - when ctx ends, its error, unwrapped from the others, so synth.IsRetryable says
//     no to a cancellation.
//
// Usage sums every attempt's reported tokens. The prompt version (Options.PromptVersion)
// and the answering model are recorded in synth.Result.
//
// # Privacy and logging
//
// Logs carry operation, workspace and chat ids, attempt numbers, status codes, token
// counts and validation errors (which name ids and lengths, never text, and never
// quote the model's answer: an unknown kind is given by its length). Message text,
// prompts, answers and the API key are never logged. An endpoint's error message may
// quote the request, so it stays out of error strings and logs: it is kept, redacted
// and cut to 200 runes, in StatusError.Message only.
//
// # Metrics
//
// larkline_synthesis_model_requests_total{op,outcome},
// larkline_synthesis_model_request_duration_seconds{op},
// larkline_synthesis_model_tokens_total{op,type},
// larkline_synthesis_model_retries_total{op,reason},
// larkline_synthesis_model_drafts_total.
package openai
