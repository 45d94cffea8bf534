package larkapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
)

func TestLarkAPIErrorsAreClassified(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&APIError{Op: "x", Err: errors.New("dial tcp: connection refused")}, true},
		{&APIError{Op: "x", Status: 429, Code: CodeRateLimited}, true},
		{&APIError{Op: "x", Status: 400, Code: CodeRateLimited}, true},
		{&APIError{Op: "x", Status: 500, Code: 500}, true},
		{&APIError{Op: "x", Status: 400, Code: CodeTenantTokenBad}, true},
		{&APIError{Op: "x", Status: 400, Code: 230027}, false},
		{&APIError{Op: "x", Err: context.Canceled}, false},
		{fmt.Errorf("wrapped: %w", &APIError{Op: "x", Status: 503}), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errors.New("something else"), false},
		{nil, false},
		{fmt.Errorf("list: %w", ErrInvalidQuery), false},
		{fmt.Errorf("list: %w", ErrMalformedPage), false},
	}
	for i, tt := range tests {
		if got := IsRetryable(tt.err); got != tt.want {
			t.Errorf("%d: IsRetryable(%v) = %v, want %v", i, tt.err, got, tt.want)
		}
	}
}

func TestAnswerError(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	long := string(make([]byte, 300))
	tests := []struct {
		name  string
		raw   *larkcore.ApiResp
		code  int
		msg   string
		after time.Duration
		rl    bool
	}{
		{"reset header honoured", &larkcore.ApiResp{StatusCode: 429, Header: hdr("X-Ogw-Ratelimit-Reset", "7")}, CodeRateLimited, "slow down", 7 * time.Second, true},
		{"reset header capped", &larkcore.ApiResp{StatusCode: 429, Header: hdr("X-Ogw-Ratelimit-Reset", "86400")}, CodeRateLimited, "", MaxRetryAfter, true},
		{"rate limit without a header waits a second", &larkcore.ApiResp{StatusCode: 400, Header: hdr()}, CodeRateLimited, "", time.Second, true},
		{"not rate limited", &larkcore.ApiResp{StatusCode: 400, Header: hdr("X-Ogw-Ratelimit-Reset", "junk")}, 230002, "bot not in chat", 0, false},
		{"no raw answer", nil, 230002, long, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := answerError("op", tt.raw, tt.code, tt.msg)
			if e.RetryAfter != tt.after || IsRateLimited(e) != tt.rl {
				t.Errorf("RetryAfter %s, rate limited %v; want %s, %v", e.RetryAfter, IsRateLimited(e), tt.after, tt.rl)
			}
			if len(e.Msg) > maxMsgBytes {
				t.Errorf("message of %d bytes kept", len(e.Msg))
			}
			if tt.raw != nil && e.Status != tt.raw.StatusCode {
				t.Errorf("status %d, want %d", e.Status, tt.raw.StatusCode)
			}
		})
	}
	if IsRateLimited(nil) || IsRateLimited(&APIError{Err: errors.New("dial"), Code: CodeRateLimited}) {
		t.Error("a missing answer counted as a rate limit")
	}
}

func TestNewRefusesANilClient(t *testing.T) {
	if _, err := New(nil); !errors.Is(err, ErrInvalidOptions) || IsRetryable(err) {
		t.Fatalf("New(nil) = %v", err)
	}
}
