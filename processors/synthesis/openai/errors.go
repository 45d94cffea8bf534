package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// StatusError is an HTTP error answer of the endpoint. It unwraps to
// synth.ErrUnavailable for 408, 425, 429 and 5xx and to synth.ErrRejected for any
// other status, so synth.IsRetryable classifies it; errors.As recovers the details.
type StatusError struct {
	StatusCode int
	// Type and Code come from an OpenAI-shaped error body ({"error":{...}}), if any,
	// when they are short tokens (letters, digits, '_', '-', '.', ':'); anything else
	// is replaced by "sha256:<first 16 hex digits>" of it.
	Type, Code string
	// MessageSHA256 is the hex SHA-256 of the endpoint's error message and
	// MessageRunes its length; the text itself is not kept (issue #19: some servers
	// quote the request, i.e. chat text, in it). Compare the hash with the endpoint's
	// own logs when debugging.
	MessageSHA256 string
	MessageRunes  int
	// RetryAfter is the endpoint's Retry-After, or 0 when it sent none.
	RetryAfter time.Duration
}

// tokenOrHash keeps s when it is a short token, and a hash of it otherwise.
func tokenOrHash(s string) string {
	if s == "" {
		return ""
	}
	if len(s) <= 64 && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:", r))
	}) < 0 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chat completions answered HTTP %d", e.StatusCode)
	if e.Type != "" || e.Code != "" {
		fmt.Fprintf(&b, " (%s", e.Type)
		if e.Code != "" {
			fmt.Fprintf(&b, "/%s", e.Code)
		}
		b.WriteString(")")
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	return b.String()
}

// Unwrap classifies the status.
func (e *StatusError) Unwrap() error {
	if retryableStatus(e.StatusCode) {
		return synth.ErrUnavailable
	}
	return synth.ErrRejected
}

func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooEarly ||
		code == http.StatusTooManyRequests || code >= 500
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 1e6) * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
