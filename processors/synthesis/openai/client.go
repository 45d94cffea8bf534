package openai

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/processors/synthesis/synth"
)

// Name is the Result.Synthesizer of this package.
const Name = "openai"

// maxResponseBytes bounds a response body read into memory.
const maxResponseBytes = 4 << 20

// Response format types.
const (
	formatJSONSchema = "json_schema"
	formatJSONObject = "json_object"
)

// Client is a [synth.Synthesizer] and [synth.Summarizer] backed by an OpenAI-compatible
// chat-completions endpoint. It is safe for concurrent use.
type Client struct {
	o        Options
	endpoint string
	// system is the synthesis system prompt (Options.Instructions in it, if any).
	system string
	log    *slog.Logger
	m      *metrics
	// noSchema latches once the endpoint has rejected json_schema with a 400 and then
	// accepted json_object: later calls go straight to json_object.
	noSchema atomic.Bool
	// sleep waits between attempts; tests replace it to observe backoff.
	sleep func(ctx context.Context, d time.Duration) error
}

var (
	_ synth.Synthesizer = (*Client)(nil)
	_ synth.Summarizer  = (*Client)(nil)
)

// New validates o (see [Options]) and returns a client. It registers its metrics on
// o.Registry, failing if they are already registered there.
func New(o Options) (*Client, error) {
	endpoint, err := o.normalize()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registry)
	if err != nil {
		return nil, err
	}
	c := &Client{
		o:        o,
		endpoint: endpoint,
		system:   synthesizePrompt(synthesizeInstructions),
		log:      o.Logger.With("component", "synthesis.openai", "model", o.Model, "prompt_version", o.PromptVersion),
		m:        m,
		sleep:    backoff.Sleep,
	}
	if o.Instructions != "" {
		c.system = synthesizePrompt(o.Instructions)
	}
	return c, nil
}

// Synthesize sends the chunk to the model and returns the validated drafts. A request
// with no shown, citable message returns no drafts without calling the model. Errors:
// synth.ErrInvalidRequest; synth.ErrInvalidOutput after 1+MaxRetries answers that
// failed validation (each retry tells the model what was wrong); synth.ErrUnavailable
// (with a *StatusError for HTTP answers) after the retries, or at once when
// Retry-After exceeds MaxRetryAfter; synth.ErrRejected for 4xx answers; the context's
// error when ctx ends. Usage counts every attempt.
func (c *Client) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	res := synth.Result{Synthesizer: Name, Model: c.o.Model, PromptVersion: c.o.PromptVersion}
	if err := synth.ValidateRequest(req); err != nil {
		return res, err
	}
	content, ok := renderRequest(req)
	if !ok {
		return res, nil
	}
	var drafts []synth.Draft
	usage, model, err := c.complete(ctx, call{
		op:     opSynthesize,
		system: c.system,
		user:   content,
		schema: namedSchema{name: "timeline_entries", schema: entriesSchema},
		accept: func(answer string) (err error) {
			drafts, err = parseDrafts(req, answer)
			return err
		},
		logAttrs: []any{"workspace_id", string(req.Workspace), "chat_id", string(req.Chat), "window_start", formatTime(req.WindowStart)},
	})
	res.Usage = usage
	if model != "" {
		res.Model = model
	}
	if err != nil {
		return res, fmt.Errorf("synthesizing window %s of chat %s: %w", formatTime(req.WindowStart), req.Chat, err)
	}
	res.Drafts = drafts
	c.m.drafts.Add(float64(len(drafts)))
	return res, nil
}

// Summarize asks the model for a workspace summary (design §13) from the visible
// entries, with the previous AI summary for continuity. Errors as [Client.Synthesize].
func (c *Client) Summarize(ctx context.Context, req synth.SummaryRequest) (string, synth.Usage, error) {
	if err := synth.ValidateSummaryRequest(req); err != nil {
		return "", synth.Usage{}, err
	}
	var text string
	usage, _, err := c.complete(ctx, call{
		op:     opSummarize,
		system: summarizeSystemPrompt,
		user:   renderSummary(req),
		schema: namedSchema{name: "workspace_summary", schema: summarySchema},
		accept: func(answer string) (err error) {
			text, err = parseSummary(answer)
			return err
		},
		logAttrs: []any{"workspace_id", string(req.Workspace), "entries", len(req.Entries)},
	})
	if err != nil {
		return "", usage, fmt.Errorf("summarizing workspace %s: %w", req.Workspace, err)
	}
	return text, usage, nil
}

type namedSchema struct {
	name   string
	schema json.RawMessage
}

type call struct {
	op       string
	system   string
	user     string
	schema   namedSchema
	accept   func(answer string) error
	logAttrs []any
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model          string         `json:"model"`
	Messages       []chatMessage  `json:"messages"`
	Temperature    float64        `json:"temperature"`
	MaxTokens      int            `json:"max_tokens,omitempty"`
	ResponseFormat responseFormat `json:"response_format"`
}

type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *jsonSchemaSpec `json:"json_schema,omitempty"`
}

type jsonSchemaSpec struct {
	Name   string          `json:"name"`
	Strict bool            `json:"strict"`
	Schema json.RawMessage `json:"schema"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content json.RawMessage `json:"content"`
			Refusal *string         `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// complete runs one call: at most 1+MaxRetries attempts, retrying unavailability with
// backoff and invalid answers with feedback. A 400 to json_schema switches to
// json_object once, without spending an attempt (servers that do not implement
// structured outputs answer 400 to it); the switch sticks for the client's lifetime
// once json_object was accepted.
func (c *Client) complete(ctx context.Context, cl call) (synth.Usage, string, error) {
	r := &callRun{c: c, cl: cl, attempts: 1 + *c.o.MaxRetries,
		log: c.log.With(append([]any{"op", cl.op}, cl.logAttrs...)...)}
	for attempt := 1; attempt <= r.attempts; {
		format := r.format()
		body, err := json.Marshal(c.request(cl, r.feedback, format))
		if err != nil {
			return r.usage, r.model, fmt.Errorf("%w: encoding request: %w", synth.ErrInvalidRequest, err)
		}
		start := time.Now()
		resp, err := c.post(ctx, body)
		c.m.duration.WithLabelValues(cl.op).Observe(time.Since(start).Seconds())
		if err != nil {
			again, err := r.postFailed(ctx, attempt, format, err)
			if err != nil {
				return r.usage, r.model, err
			}
			if !again {
				attempt++
			}
			continue
		}
		if err := r.answered(resp, attempt); err != nil {
			attempt++
			continue
		}
		r.succeeded(attempt)
		return r.usage, r.model, nil
	}
	return r.usage, r.model, fmt.Errorf("giving up after %d attempts: %w", r.attempts, r.lastErr)
}

// callRun is the state of one call across its attempts.
type callRun struct {
	c        *Client
	cl       call
	log      *slog.Logger
	attempts int // 1+MaxRetries

	usage    synth.Usage // summed over the attempts
	model    string      // the model the endpoint last named
	lastErr  error
	feedback []chatMessage // why the last answer was rejected, for the next attempt
	fellBack bool          // the endpoint rejected json_schema during this call
}

// format is the response format of the next request: json_object once the endpoint
// rejected json_schema.
func (r *callRun) format() string {
	if r.c.noSchema.Load() || r.fellBack {
		return formatJSONObject
	}
	return formatJSONSchema
}

// postFailed follows a failed post (err) of attempt in format. again reports that the
// same attempt is to be made once more in json_object (the endpoint rejected
// json_schema); an error ends the call. Otherwise the next attempt follows, after a
// backoff, or after the last attempt the call gives up with r.lastErr.
func (r *callRun) postFailed(ctx context.Context, attempt int, format string, err error) (again bool, _ error) {
	c, op, log := r.c, r.cl.op, r.log
	if ctxErr := ctx.Err(); ctxErr != nil {
		c.m.requests.WithLabelValues(op, outcomeCanceled).Inc()
		return false, fmt.Errorf("calling model: %w", ctxErr)
	}
	var se *StatusError
	if errors.As(err, &se) && se.StatusCode == http.StatusBadRequest && format == formatJSONSchema {
		c.m.requests.WithLabelValues(op, outcomeRejected).Inc()
		c.m.retries.WithLabelValues(op, reasonSchemaFallback).Inc()
		log.Info("endpoint rejected json_schema response format; retrying with json_object", "status", se.StatusCode)
		r.fellBack = true
		return true, nil // the same attempt, in the other format
	}
	if errors.Is(err, synth.ErrRejected) {
		c.m.requests.WithLabelValues(op, outcomeRejected).Inc()
		log.Warn("model endpoint rejected the request", "attempt", attempt, "err", err)
		return false, err
	}
	c.m.requests.WithLabelValues(op, outcomeUnavailable).Inc()
	r.lastErr = err
	if attempt == r.attempts {
		return false, nil
	}
	delay, ok := c.retryDelay(attempt, err)
	if !ok {
		log.Warn("model endpoint asks to retry later than MaxRetryAfter; giving up this call", "attempt", attempt, "err", err)
		return false, err
	}
	c.m.retries.WithLabelValues(op, reasonUnavailable).Inc()
	log.Warn("model endpoint unavailable; retrying", "attempt", attempt, "delay", delay, "err", err)
	if err := c.sleep(ctx, delay); err != nil {
		return false, fmt.Errorf("waiting to retry: %w", err)
	}
	return false, nil
}

// answered counts the response's usage and accepts its answer. A rejected answer
// (the error) becomes r.lastErr and the feedback of the next attempt.
func (r *callRun) answered(resp *chatResponse, attempt int) error {
	c, op := r.c, r.cl.op
	r.usage = r.usage.Add(synth.Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens})
	c.m.tokens.WithLabelValues(op, "prompt").Add(float64(resp.Usage.PromptTokens))
	c.m.tokens.WithLabelValues(op, "completion").Add(float64(resp.Usage.CompletionTokens))
	if resp.Model != "" {
		r.model = resp.Model
	}
	answer, err := resp.answer()
	if err == nil {
		err = r.cl.accept(answer)
	}
	if err != nil {
		c.m.requests.WithLabelValues(op, outcomeInvalid).Inc()
		r.lastErr = err
		if attempt < r.attempts {
			c.m.retries.WithLabelValues(op, reasonInvalidOutput).Inc()
			r.log.Warn("model answer invalid; retrying with feedback", "attempt", attempt, "err", err)
		}
		r.feedback = []chatMessage{
			{Role: "assistant", Content: truncateRunes(answer, maxFeedbackRunes)},
			{Role: "user", Content: "Your previous answer was rejected: " + err.Error() +
				". Answer again with JSON of the required shape that follows every rule."},
		}
		return err
	}
	return nil
}

// succeeded counts and logs a call whose answer was accepted at attempt; a fallback
// to json_object sticks from now on.
func (r *callRun) succeeded(attempt int) {
	r.c.m.requests.WithLabelValues(r.cl.op, outcomeOK).Inc()
	if r.fellBack && !r.c.noSchema.Swap(true) {
		r.log.Info("using json_object response format for this endpoint from now on")
	}
	r.log.Debug("model call succeeded", "attempt", attempt, "prompt_tokens", r.usage.PromptTokens, "completion_tokens", r.usage.CompletionTokens)
}

func (c *Client) request(cl call, feedback []chatMessage, format string) chatRequest {
	r := chatRequest{
		Model:       c.o.Model,
		Messages:    append([]chatMessage{{Role: "system", Content: cl.system}, {Role: "user", Content: cl.user}}, feedback...),
		Temperature: 0,
		MaxTokens:   c.o.MaxOutputTokens,
	}
	r.ResponseFormat.Type = format
	if format == formatJSONSchema {
		r.ResponseFormat.JSONSchema = &jsonSchemaSpec{Name: cl.schema.name, Strict: true, Schema: cl.schema.schema}
	}
	return r
}

// post sends one attempt, bounded by Options.Timeout. Transport errors and timeouts
// are wrapped in synth.ErrUnavailable; HTTP errors are *StatusError.
func (c *Client) post(ctx context.Context, body []byte) (*chatResponse, error) {
	actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: building request: %w", synth.ErrRejected, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "larkline-synthesis")
	if c.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.APIKey)
	}
	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: POST %s: %w", synth.ErrUnavailable, c.endpoint, unwrapURLError(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading response: %w", synth.ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp, data)
	}
	// A body that is not a chat completion comes from a broken server or a proxy in
	// front of it, not from the model: it counts as unavailability.
	if len(data) > maxResponseBytes {
		return nil, fmt.Errorf("%w: response larger than %d bytes", synth.ErrUnavailable, maxResponseBytes)
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, fmt.Errorf("%w: response is not a chat completion: %s", synth.ErrUnavailable, jsonProblem(err))
	}
	return &cr, nil
}

// answer extracts the first choice's text.
func (r *chatResponse) answer() (string, error) {
	if len(r.Choices) == 0 {
		return "", fmt.Errorf("%w: response has no choices", synth.ErrInvalidOutput)
	}
	ch := r.Choices[0]
	if ch.Message.Refusal != nil && strings.TrimSpace(*ch.Message.Refusal) != "" {
		return "", fmt.Errorf("%w: the model refused to answer", synth.ErrInvalidOutput)
	}
	var text string
	if err := json.Unmarshal(ch.Message.Content, &text); err != nil {
		// Some servers send content as parts: [{"type":"text","text":"..."}].
		var parts []struct {
			Type, Text string
		}
		if err := json.Unmarshal(ch.Message.Content, &parts); err != nil {
			return "", fmt.Errorf("%w: message has no text content", synth.ErrInvalidOutput)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		text = b.String()
	}
	if ch.FinishReason == "length" {
		return text, fmt.Errorf("%w: the answer was cut off at the output token limit; answer more briefly", synth.ErrInvalidOutput)
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("%w: empty answer", synth.ErrInvalidOutput)
	}
	return text, nil
}

func statusError(resp *http.Response, data []byte) *StatusError {
	se := &StatusError{StatusCode: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil {
		if m := body.Error.Message; m != "" {
			sum := sha256.Sum256([]byte(m))
			se.MessageSHA256, se.MessageRunes = hex.EncodeToString(sum[:]), utf8.RuneCountInString(m)
		}
		se.Type = tokenOrHash(body.Error.Type)
		var code string
		if json.Unmarshal(body.Error.Code, &code) == nil {
			se.Code = tokenOrHash(code)
		} else if len(body.Error.Code) > 0 && string(body.Error.Code) != "null" {
			se.Code = tokenOrHash(string(body.Error.Code))
		}
	}
	return se
}

// retryDelay is the wait before the next attempt after attempt failed with err:
// exponential backoff with jitter, raised to the endpoint's Retry-After. ok is false
// when Retry-After exceeds MaxRetryAfter.
func (c *Client) retryDelay(attempt int, err error) (time.Duration, bool) {
	d := c.o.BackoffBase << min(attempt-1, 30)
	if d <= 0 || d > c.o.BackoffMax {
		d = c.o.BackoffMax
	}
	d = d/2 + rand.N(d/2+1) // jitter over [d/2, d]
	var se *StatusError
	if errors.As(err, &se) && se.RetryAfter > 0 {
		if se.RetryAfter > c.o.MaxRetryAfter {
			return 0, false
		}
		d = max(d, se.RetryAfter)
	}
	return d, true
}

// unwrapURLError drops the *url.Error wrapper, whose text repeats method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
