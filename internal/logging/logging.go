package logging

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Level names accepted by [ParseLevel] and [New].
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Format names accepted by [New].
const (
	FormatJSON = "json" // one JSON object per line (slog.JSONHandler)
	FormatText = "text" // key=value pairs (slog.TextHandler)
)

// HashIDLen is the number of hex digits [HashID] returns (64 bits of the digest).
const HashIDLen = 16

var (
	// ErrInvalidLevel is returned (wrapped) for a level that is not one of debug, info,
	// warn or error.
	ErrInvalidLevel = errors.New("invalid log level")
	// ErrInvalidFormat is returned (wrapped) for a format that is not json or text.
	ErrInvalidFormat = errors.New("invalid log format")
	// ErrNilWriter is returned by [New] when it is given no writer.
	ErrNilWriter = errors.New("nil log writer")
)

// ParseLevel maps a level name (debug, info, warn, error; case-insensitive) to its
// slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case LevelDebug:
		return slog.LevelDebug, nil
	case LevelInfo:
		return slog.LevelInfo, nil
	case LevelWarn:
		return slog.LevelWarn, nil
	case LevelError:
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%w %q: want one of debug, info, warn, error", ErrInvalidLevel, s)
}

// ValidFormat reports whether format names a supported output format, returning a
// wrapped [ErrInvalidFormat] when it does not.
func ValidFormat(format string) error {
	switch strings.ToLower(strings.TrimSpace(format)) {
	case FormatJSON, FormatText:
		return nil
	}
	return fmt.Errorf("%w %q: want json or text", ErrInvalidFormat, format)
}

// New returns a logger writing to w at the given level in the given format. Level
// and format are validated; both problems are reported together.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	lvl, lerr := ParseLevel(level)
	ferr := ValidFormat(format)
	var werr error
	if w == nil {
		werr = ErrNilWriter
	}
	if err := errors.Join(werr, lerr, ferr); err != nil {
		return nil, fmt.Errorf("building logger: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if strings.ToLower(strings.TrimSpace(format)) == FormatText {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// OrDiscard returns l, or a logger that discards everything when l is nil.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// HashID returns a short, stable pseudonym for an identifier: the first [HashIDLen]
// hex digits of its SHA-256. The same input always gives the same output, in every
// process, so log lines about one chat can be correlated without naming it. It is a
// pseudonym, not a secret: anyone holding a candidate id can compute its hash. The
// empty string hashes to the empty string, so a missing id stays visibly missing.
func HashID(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:HashIDLen/2])
}
