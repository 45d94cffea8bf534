package larkapi

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
)

// sdkLogger adapts the Lark SDK's logger interface (larkcore.Logger) to slog without
// letting the SDK's payload logging through.
//
// The SDK logs raw request bodies and event payloads at debug level ("event request:
// header:…,body:…", "receive message, … payload: …") and the long-connection URL,
// whose query carries an access key and a ticket, at info level. Debug is therefore
// dropped entirely; other lines keep only a known, payload-free prefix (or their first
// clause), with URL queries removed and the length bounded.
type sdkLogger struct{ log *slog.Logger }

// sdkSafePrefixes start the SDK log lines whose remainder carries errors, counts and
// hosts but no payload (checked against v3.5.1's ws and dispatcher code).
var sdkSafePrefixes = []string{
	"connect failed", "trying to reconnect", "connected to", "disconnected to",
	"ping failed", "receive message failed", "response message failed",
	"handle message failed", "unmarshal message failed", "connection is closed",
	"handle event", "event handle err", "AuthByChallenge", "write resp result error",
}

// SDKLogger returns the sanitizing adapter for any SDK component that takes a
// larkcore.Logger, the Open API client included (lark.WithLogger): payloads, bodies
// and URL queries never pass; Lark's error codes do.
func SDKLogger(log *slog.Logger) larkcore.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return sdkLogger{log}
}

// sdkCode finds Lark error codes in an SDK line ("Code: 99991663" from the SDK's
// Prettify, "code":99991663 from JSON, code=…).
var sdkCode = regexp.MustCompile(`(?i)"?\bcode"?\s*[:=]\s*(-?\d{1,10})\b`)

var urlQuery = regexp.MustCompile(`((?:wss?|https?)://[^\s?"']*)\?[^\s"']*`)

const maxSDKLogBytes = 300

func (l sdkLogger) Debug(context.Context, ...any) {}

func (l sdkLogger) Info(ctx context.Context, args ...any) { l.emit(ctx, slog.LevelDebug, args) }

func (l sdkLogger) Warn(ctx context.Context, args ...any) { l.emit(ctx, slog.LevelWarn, args) }

func (l sdkLogger) Error(ctx context.Context, args ...any) { l.emit(ctx, slog.LevelWarn, args) }

func (l sdkLogger) emit(ctx context.Context, level slog.Level, args []any) {
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, "lark sdk: "+sanitizeSDKLog(fmt.Sprint(args...)))
}

// sanitizeSDKLog keeps what may be logged of one SDK log line.
func sanitizeSDKLog(s string) string {
	safe := false
	for _, p := range sdkSafePrefixes {
		if strings.HasPrefix(s, p) {
			safe = true
			break
		}
	}
	if !safe {
		// Unknown line: keep its first clause only (the SDK puts values after ':' or
		// ','), and the error codes it names.
		var codes []string
		for _, m := range sdkCode.FindAllStringSubmatch(s, 4) {
			codes = append(codes, m[1])
		}
		if i := strings.IndexAny(s, ",:"); i >= 0 {
			s = s[:i]
		}
		if len(codes) > 0 {
			s += " (code " + strings.Join(codes, ", ") + ")"
		}
	}
	s = urlQuery.ReplaceAllString(s, "$1?…")
	if len(s) > maxSDKLogBytes {
		s = strings.ToValidUTF8(s[:maxSDKLogBytes], "") + "…"
	}
	return s
}
