package schemas

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Bounds enforced by Validate. The normalizer bounds content well below
// MaxContentBytes; these are the hard limits of the record contract.
const (
	// MaxContentBytes bounds EvidenceRecord.Content.
	MaxContentBytes = 256 << 10
	// MaxMetadataBytes bounds EvidenceRecord.MetadataJSON.
	MaxMetadataBytes = 16 << 10
	// MaxDisplayNameBytes bounds EvidenceRecord.ActorDisplayName.
	MaxDisplayNameBytes = 256
	// MaxTokenLen bounds short codes: message types, reasons, stages, statuses,
	// workspace types, reconcile versions.
	MaxTokenLen = 64
	// MaxWorkspaceChats bounds the chats bound to one workspace.
	MaxWorkspaceChats = 10_000
	// MaxDeadLetterErrorBytes bounds DeadLetter.Error.
	MaxDeadLetterErrorBytes = 4096
	// maxTopicLen is Kafka's limit on a topic name.
	maxTopicLen = 249
	// maxSchemaRefLen bounds DeadLetter.OriginalSchema.
	maxSchemaRefLen = 64
)

// checker collects the first rule a record breaks. Messages name fields and quote
// ids, codes and hashes only, never free text, so errors are safe to log.
type checker struct {
	rec string
	err error
}

func (c *checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %s", ErrInvalidRecord, c.rec, fmt.Sprintf(format, args...))
	}
}

// wrap records an error of another package (ids.ErrInvalidID) keeping it in the chain.
func (c *checker) wrap(field string, err error) {
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("%w: %s.%s: %w", ErrInvalidRecord, c.rec, field, err)
	}
}

// validID checks an id with its ids.Parse function; "" passes when optional.
func validID[T ~string](c *checker, field string, v T, parse func(string) (T, error), optional bool) {
	if !optional || v != "" {
		_, err := parse(string(v))
		c.wrap(field, err)
	}
}

func (c *checker) time(field string, t time.Time) {
	if t.IsZero() {
		c.fail("%s is not set", field)
	}
}

// token checks a short code: 1..max bytes of letters, digits, '_', '-', '.', ':'.
func (c *checker) token(field, s string, max int) {
	if s == "" {
		c.fail("%s is empty", field)
		return
	}
	if len(s) > max {
		c.fail("%s is longer than %d bytes", field, max)
		return
	}
	if !isToken(s) {
		c.fail("%s %q has characters outside [A-Za-z0-9_.:-]", field, s)
	}
}

// optToken is token for a field where "" means null.
func (c *checker) optToken(field, s string, max int) {
	if s != "" {
		c.token(field, s, max)
	}
}

// text checks free text without quoting it: valid UTF-8 and at most max bytes.
func (c *checker) text(field, s string, max int) {
	if len(s) > max {
		c.fail("%s is %d bytes, more than %d", field, len(s), max)
		return
	}
	if !utf8.ValidString(s) {
		c.fail("%s is not valid UTF-8", field)
	}
}

func (c *checker) sha256Hex(field, s string) {
	if !isSHA256Hex(s) {
		c.fail("%s %.80q is not 64 lower-case hex digits", field, s)
	}
}

func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.' || b == ':') {
			return false
		}
	}
	return true
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			return false
		}
	}
	return true
}
