package openai

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/options"
)

// Defaults of [Options].
const (
	DefaultTimeout         = 60 * time.Second
	DefaultMaxRetries      = 2
	DefaultMaxOutputTokens = 2048
	DefaultBackoffBase     = 500 * time.Millisecond
	DefaultBackoffMax      = 15 * time.Second
	DefaultMaxRetryAfter   = 30 * time.Second
	// DefaultPromptVersion names the prompts and output schemas in prompt.go. Change it
	// with them: it is recorded with every entry and summary (design §12.4).
	DefaultPromptVersion = "openai-timeline-v2"

	maxRetriesLimit  = 10
	maxTimeout       = 10 * time.Minute
	maxOutputTokens  = 1 << 20
	maxModelLen      = 256
	maxPromptVersion = 64
	// MaxInstructionsBytes bounds Options.Instructions.
	MaxInstructionsBytes = 32 << 10
	maxRetryAfterHard    = 10 * time.Minute
)

// Environment variables read by [Options.WithEnv].
const (
	EnvBaseURL = "LARKLINE_OPENAI_BASE_URL"
	EnvModel   = "LARKLINE_OPENAI_MODEL"
	EnvAPIKey  = "LARKLINE_OPENAI_API_KEY"
	// Fallbacks understood by most OpenAI tooling.
	EnvBaseURLFallback = "OPENAI_BASE_URL"
	EnvAPIKeyFallback  = "OPENAI_API_KEY"
)

// ErrInvalidOptions is returned (wrapped) by [New]; the message names the field.
var ErrInvalidOptions = errors.New("invalid openai options")

// Options configures a [Client]. BaseURL and Model are required; there is no default
// endpoint, so chat text never goes to a third party unless configured to.
type Options struct {
	// BaseURL is the API root, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1;
	// requests go to BaseURL + "/chat/completions". http or https, no credentials,
	// query or fragment.
	BaseURL string
	// AllowInsecure lets BaseURL be http:// to a host that is not loopback (chat
	// text and the API key then cross the network in clear). Off, that is refused
	// (issue #29).
	AllowInsecure bool
	// Model is the model name sent with every request.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>"; empty sends no header (local
	// servers). It is never logged.
	APIKey string
	// Timeout bounds each HTTP attempt (0: DefaultTimeout; at most 10m).
	Timeout time.Duration
	// MaxRetries bounds the attempts after the first, for unavailability (408, 429,
	// 5xx, transport errors, timeouts) and invalid output alike: a call makes at most
	// 1+MaxRetries attempts. nil means DefaultMaxRetries, 0 none; at most 10.
	MaxRetries *int
	// MaxOutputTokens is sent as max_tokens (0: DefaultMaxOutputTokens).
	MaxOutputTokens int
	// PromptVersion is recorded as Result.PromptVersion (empty: DefaultPromptVersion).
	PromptVersion string
	// Instructions, when set, replace the package's instructions in the synthesis
	// system prompt (what to write, of which kinds, how to cite): the opening line,
	// the rule that chat data is untrusted (issue #29) and the answer's JSON shape stay
	// the package's. At most MaxInstructionsBytes of UTF-8. Instructions of your own
	// need a PromptVersion of their own (not DefaultPromptVersion): it is what the
	// entries record of the prompt that wrote them. Summaries keep the package's prompt.
	Instructions string
	// HTTPClient sends the requests (nil: a client of its own, cloned from
	// http.DefaultTransport). Attempts are bounded by Timeout through their context.
	HTTPClient *http.Client
	// BackoffBase and BackoffMax shape the exponential backoff between attempts after
	// unavailability: the n-th retry waits about BackoffBase·2ⁿ⁻¹, capped at
	// BackoffMax, with jitter (0: the defaults).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits out; a longer one ends
	// the call at once with ErrUnavailable, leaving the wait to the worker's window
	// retry (0: DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// Logger receives ids, hashes, counts and status codes; nil discards.
	Logger *slog.Logger
	// Registry receives the client's metrics; nil leaves them unregistered.
	Registry *prometheus.Registry
}

// WithEnv returns o with BaseURL, Model and APIKey filled from the environment where
// they are empty: LARKLINE_OPENAI_BASE_URL (else OPENAI_BASE_URL),
// LARKLINE_OPENAI_MODEL, LARKLINE_OPENAI_API_KEY (else OPENAI_API_KEY). Values set in
// o (from configuration) win. lookup is os.LookupEnv in production.
func (o Options) WithEnv(lookup func(string) (string, bool)) Options {
	get := func(names ...string) string {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if o.BaseURL == "" {
		o.BaseURL = get(EnvBaseURL, EnvBaseURLFallback)
	}
	if o.Model == "" {
		o.Model = get(EnvModel)
	}
	if o.APIKey == "" {
		o.APIKey = get(EnvAPIKey, EnvAPIKeyFallback)
	}
	return o
}

// Check reports the first value of o that breaks the client's rules (after the
// defaults), as an *options.Error naming the field, or nil. The configuration
// layer calls it, when the synthesizer is openai, to report a wrong key before
// anything starts.
func (o Options) Check() error {
	_, err := o.normalize()
	return err
}

// endpoint checks BaseURL and returns the chat completions URL under it.
func (o *Options) endpoint() (string, error) {
	bad := func(format string, args ...any) (string, error) {
		var p options.Problems
		if o.BaseURL == "" {
			p.Add("BaseURL", nil, format, args...)
		} else {
			p.Add("BaseURL", o.BaseURL, format, args...)
		}
		return "", p.Err(ErrInvalidOptions)
	}
	u, err := url.Parse(strings.TrimSpace(o.BaseURL))
	switch {
	case o.BaseURL == "":
		return bad("is required (or set %s)", EnvBaseURL)
	case err != nil:
		return bad("%v", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return bad("must be an absolute http:// or https:// URL")
	case u.User != nil:
		return bad("must not carry credentials; use the API key")
	case u.RawQuery != "" || u.Fragment != "":
		return bad("must not have a query or fragment")
	case u.Scheme == "http" && !options.LoopbackHost(u.Hostname()) && !o.AllowInsecure:
		return bad("is http:// to a host that is not loopback: chat text and the API key would cross the network in clear; use https:// (or set allowInsecure)")
	}
	return strings.TrimRight(u.String(), "/") + "/chat/completions", nil
}

// normalize applies defaults and validates, returning the endpoint URL.
func (o *Options) normalize() (string, error) {
	bad := func(field string, value any, format string, args ...any) (string, error) {
		var p options.Problems
		p.Add(field, value, format, args...)
		return "", p.Err(ErrInvalidOptions)
	}
	endpoint, err := o.endpoint()
	if err != nil {
		return "", err
	}

	switch {
	case o.Model == "":
		return bad("Model", nil, "is required (or set %s)", EnvModel)
	case len(o.Model) > maxModelLen || strings.IndexFunc(o.Model, unicode.IsSpace) >= 0:
		return bad("Model", o.Model, "must be 1..%d bytes without whitespace", maxModelLen)
	case strings.IndexFunc(o.APIKey, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return bad("APIKey", nil, "must not contain whitespace or control characters")
	}

	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	if o.Timeout < 0 || o.Timeout > maxTimeout {
		return bad("Timeout", o.Timeout, "must be positive and at most %s", maxTimeout)
	}
	if o.MaxRetries == nil {
		o.MaxRetries = new(DefaultMaxRetries)
	}
	if *o.MaxRetries < 0 || *o.MaxRetries > maxRetriesLimit {
		return bad("MaxRetries", *o.MaxRetries, "must be between 0 and %d", maxRetriesLimit)
	}
	o.MaxOutputTokens = cmp.Or(o.MaxOutputTokens, DefaultMaxOutputTokens)
	if o.MaxOutputTokens < 0 || o.MaxOutputTokens > maxOutputTokens {
		return bad("MaxOutputTokens", o.MaxOutputTokens, "must be between 1 and %d", maxOutputTokens)
	}
	o.PromptVersion = cmp.Or(o.PromptVersion, DefaultPromptVersion)
	if len(o.PromptVersion) > maxPromptVersion || strings.IndexFunc(o.PromptVersion, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return bad("PromptVersion", o.PromptVersion, "must be 1..%d bytes without whitespace", maxPromptVersion)
	}
	switch {
	case o.Instructions == "":
	case len(o.Instructions) > MaxInstructionsBytes || !utf8.ValidString(o.Instructions) || strings.TrimSpace(o.Instructions) == "":
		return bad("Instructions", nil, "must be 1..%d bytes of UTF-8, not blank", MaxInstructionsBytes)
	case o.PromptVersion == DefaultPromptVersion:
		return bad("PromptVersion", o.PromptVersion, "must name instructions of your own: not the package's %s", DefaultPromptVersion)
	}
	o.BackoffBase = cmp.Or(o.BackoffBase, DefaultBackoffBase)
	o.BackoffMax = cmp.Or(o.BackoffMax, max(DefaultBackoffMax, o.BackoffBase))
	if o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase {
		return bad("BackoffMax", o.BackoffMax, "must be at least BackoffBase (%s), which must be positive", o.BackoffBase)
	}
	o.MaxRetryAfter = cmp.Or(o.MaxRetryAfter, DefaultMaxRetryAfter)
	if o.MaxRetryAfter < 0 || o.MaxRetryAfter > maxRetryAfterHard {
		return bad("MaxRetryAfter", o.MaxRetryAfter, "must be positive and at most %s", maxRetryAfterHard)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return endpoint, nil
}
