package ids

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// WorkspaceID identifies a larkline workspace (an incident in the ticket system).
type WorkspaceID string

// ChatID is a Lark chat id (oc_…).
type ChatID string

// MessageID is a Lark message id (om_…).
type MessageID string

// MaxIDLen bounds every id accepted from outside.
const MaxIDLen = 128

// ErrInvalidID is returned (wrapped) by every Parse function.
var ErrInvalidID = errors.New("invalid id")

// Source and source types of the design (§8.2, §9, §10).
const (
	SourceLark                 = "lark"
	SourceSystem               = "system"
	SourceTypeLarkMessage      = "lark_message"
	SourceTypeLarkMessages     = "lark_messages"
	SourceTypeLarkWindow       = "lark_timeline_window"
	DefaultProcessorVersion    = "v1"
	maxProcessorVersionLen     = 32
	windowStartLayout          = time.RFC3339
	evidenceKeySeparatorsCount = 2
)

func check(kind, s string, prefix string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalidID, kind)
	case len(s) > MaxIDLen:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalidID, kind, MaxIDLen)
	case prefix != "" && !strings.HasPrefix(s, prefix):
		return fmt.Errorf("%w: %s %q does not start with %q", ErrInvalidID, kind, s, prefix)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == ':') {
			return fmt.Errorf("%w: %s %q has character %q (allowed: letters, digits, _ - . :)", ErrInvalidID, kind, s, r)
		}
	}
	return nil
}

// ParseWorkspaceID validates a workspace id.
func ParseWorkspaceID(s string) (WorkspaceID, error) {
	if err := check("workspace id", s, ""); err != nil {
		return "", err
	}
	return WorkspaceID(s), nil
}

// ParseChatID validates a Lark chat id, which always starts with "oc_".
func ParseChatID(s string) (ChatID, error) {
	if err := check("chat id", s, "oc_"); err != nil {
		return "", err
	}
	return ChatID(s), nil
}

// ParseMessageID validates a Lark message id, which always starts with "om_".
func ParseMessageID(s string) (MessageID, error) {
	if err := check("message id", s, "om_"); err != nil {
		return "", err
	}
	return MessageID(s), nil
}

// ParseProcessorVersion validates a window processor version such as "v1" or "v2".
func ParseProcessorVersion(s string) (string, error) {
	if s == "" || len(s) > maxProcessorVersionLen {
		return "", fmt.Errorf("%w: processor version must be 1..%d bytes", ErrInvalidID, maxProcessorVersionLen)
	}
	if err := check("processor version", s, ""); err != nil {
		return "", err
	}
	return s, nil
}

// ChatKey is the Kafka partition key of a chat within a workspace: <workspace>/<chat>.
func ChatKey(w WorkspaceID, c ChatID) string { return string(w) + "/" + string(c) }

// EvidenceKey is the Kafka record key of one message's evidence in one workspace.
func EvidenceKey(w WorkspaceID, c ChatID, m MessageID) string {
	return string(w) + "/" + string(c) + "/" + string(m)
}

// PartitionKey returns the part of a record key that selects the partition: everything
// before the second '/'. A key with fewer separators is hashed whole, so chat keys
// (<workspace>/<chat>) and evidence keys of the same chat share a partition.
func PartitionKey(key []byte) []byte {
	seen := 0
	for i, b := range key {
		if b == '/' {
			seen++
			if seen == evidenceKeySeparatorsCount {
				return key[:i]
			}
		}
	}
	return key
}

// ParseEvidenceKey splits and validates an evidence key.
func ParseEvidenceKey(key string) (WorkspaceID, ChatID, MessageID, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%w: evidence key %q is not <workspace>/<chat>/<message>", ErrInvalidID, key)
	}
	w, err := ParseWorkspaceID(parts[0])
	if err != nil {
		return "", "", "", err
	}
	c, err := ParseChatID(parts[1])
	if err != nil {
		return "", "", "", err
	}
	m, err := ParseMessageID(parts[2])
	if err != nil {
		return "", "", "", err
	}
	return w, c, m, nil
}

// ParseChatKey splits and validates a chat key (<workspace>/<chat>).
func ParseChatKey(key string) (WorkspaceID, ChatID, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 2 {
		return "", "", fmt.Errorf("%w: chat key %q is not <workspace>/<chat>", ErrInvalidID, key)
	}
	w, err := ParseWorkspaceID(parts[0])
	if err != nil {
		return "", "", err
	}
	c, err := ParseChatID(parts[1])
	if err != nil {
		return "", "", err
	}
	return w, c, nil
}

// MessageSourceKey is the evidence source_key of a Lark message: chat/<chat>/message/<message>.
func MessageSourceKey(c ChatID, m MessageID) string {
	return "chat/" + string(c) + "/message/" + string(m)
}

// CheckpointSourceKey is the source_key of a chat collection checkpoint: chat/<chat>.
func CheckpointSourceKey(c ChatID) string { return "chat/" + string(c) }

// WindowSourceKey is the source_key of a synthesis window state. The default processor
// version uses the design's unversioned namespace chat/<chat>/window/<start>; any other
// version writes into chat/<chat>/processor/<version>/window/<start>.
func WindowSourceKey(c ChatID, processorVersion string, windowStart time.Time) string {
	start := windowStart.UTC().Format(windowStartLayout)
	if processorVersion == "" || processorVersion == DefaultProcessorVersion {
		return "chat/" + string(c) + "/window/" + start
	}
	return "chat/" + string(c) + "/processor/" + processorVersion + "/window/" + start
}

// WindowStart returns the fixed UTC window containing t: floor(t / length) * length,
// measured from the Unix epoch. length must be positive.
func WindowStart(t time.Time, length time.Duration) time.Time {
	ns := t.UTC().UnixNano()
	l := int64(length)
	start := ns - ns%l
	if ns%l < 0 {
		start -= l
	}
	return time.Unix(0, start).UTC()
}
