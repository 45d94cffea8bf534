package schemas

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// DefaultEvidenceTopic is the topic of EvidenceRecord values.
const DefaultEvidenceTopic = "larkline.evidence.v1"

// IngestPath says which path produced an evidence version (Avro enum IngestPath).
type IngestPath string

// Ingest paths.
const (
	IngestEvent     IngestPath = "event"     // the Lark event callback
	IngestReconcile IngestPath = "reconcile" // incremental history reconciliation
	IngestRefresh   IngestPath = "refresh"   // the larger edit/delete refresh scan
	IngestManual    IngestPath = "manual"    // an operator's "refresh from sources"
)

var ingestPaths = []IngestPath{IngestEvent, IngestReconcile, IngestRefresh, IngestManual} // the Avro enum's order

// Valid reports whether p is one of the ingest paths.
func (p IngestPath) Valid() bool { return slices.Contains(ingestPaths, p) }

// Values of EvidenceRecord.IneligibleReason, a closed set (safe as a metrics label);
// the schema accepts any short code, so a newer producer's reason is not refused.
const (
	IneligibleNone              = ""
	IneligibleDeleted           = "deleted"
	IneligibleOwnApp            = "own_app"
	IneligibleInteractiveCard   = "interactive_card"
	IneligibleAttachmentOnly    = "attachment_only"
	IneligibleReferenceOnly     = "reference_only"
	IneligibleSystem            = "system"
	IneligibleForwardContainer  = "forward_container"
	IneligibleNonConversational = "non_conversational"
	IneligibleEmptyText         = "empty_text"
)

// EvidenceRecord is one version of one Lark message's evidence in one workspace
// (schema io.larkline.EvidenceRecord). Its record key is Key(). Nullable fields are
// "" for null.
type EvidenceRecord struct {
	WorkspaceID ids.WorkspaceID `avro:"workspace_id"`
	ChatID      ids.ChatID      `avro:"chat_id"`
	MessageID   ids.MessageID   `avro:"message_id"`
	// Source, SourceType and SourceKey are ids.SourceLark, ids.SourceTypeLarkMessage
	// and ids.MessageSourceKey(ChatID, MessageID).
	Source     string `avro:"source"`
	SourceType string `avro:"source_type"`
	SourceKey  string `avro:"source_key"`
	// OccurredAt is the creation time, SourceUpdatedAt the update time (creation
	// when never updated), ObservedAt when larkline ingested this version.
	OccurredAt      time.Time `avro:"occurred_at"`
	SourceUpdatedAt time.Time `avro:"source_updated_at"`
	ObservedAt      time.Time `avro:"observed_at"`

	ActorID           string        `avro:"actor_id"` // sender's open_id; "" when Lark reports none
	ActorDisplayName  string        `avro:"actor_display_name"`
	MessageType       string        `avro:"message_type"` // text, post, image, interactive, ...
	Content           string        `avro:"content"`      // normalized bounded text; "" when Deleted
	ContentHash       string        `avro:"content_hash"` // ContentHash of the semantic content
	Deleted           bool          `avro:"deleted"`
	SynthesisEligible bool          `avro:"synthesis_eligible"`
	IneligibleReason  string        `avro:"ineligible_reason"` // "" when SynthesisEligible
	ThreadID          string        `avro:"thread_id"`         // omt_…
	RootID            ids.MessageID `avro:"root_id"`
	ParentID          ids.MessageID `avro:"parent_id"`
	MetadataJSON      string        `avro:"metadata_json"` // JSON object of MetaKeys; "{}" when none
	IngestPath        IngestPath    `avro:"ingest_path"`
}

// Key returns the record key <workspace>/<chat>/<message>.
func (r *EvidenceRecord) Key() string { return ids.EvidenceKey(r.WorkspaceID, r.ChatID, r.MessageID) }

// Validate checks every rule of the record contract. Errors wrap ErrInvalidRecord.
func (r *EvidenceRecord) Validate() error {
	c := checker{rec: NameEvidenceRecord}
	validID(&c, "workspace_id", r.WorkspaceID, ids.ParseWorkspaceID, false)
	validID(&c, "chat_id", r.ChatID, ids.ParseChatID, false)
	validID(&c, "message_id", r.MessageID, ids.ParseMessageID, false)
	if r.Source != ids.SourceLark {
		c.fail("source %.40q, want %q", r.Source, ids.SourceLark)
	}
	if r.SourceType != ids.SourceTypeLarkMessage {
		c.fail("source_type %.40q, want %q", r.SourceType, ids.SourceTypeLarkMessage)
	}
	if c.err == nil && r.SourceKey != ids.MessageSourceKey(r.ChatID, r.MessageID) {
		c.fail("source_key %.300q does not match chat_id and message_id", r.SourceKey)
	}
	c.time("occurred_at", r.OccurredAt)
	c.time("source_updated_at", r.SourceUpdatedAt)
	c.time("observed_at", r.ObservedAt)
	if r.ActorID != "" {
		c.token("actor_id", r.ActorID, ids.MaxIDLen)
	}
	c.text("actor_display_name", r.ActorDisplayName, MaxDisplayNameBytes)
	c.token("message_type", r.MessageType, MaxTokenLen)
	c.text("content", r.Content, MaxContentBytes)
	c.sha256Hex("content_hash", r.ContentHash)
	if r.Deleted && r.Content != "" {
		c.fail("deleted message has content")
	}
	if r.Deleted && r.SynthesisEligible {
		c.fail("deleted message is synthesis eligible")
	}
	if r.SynthesisEligible && r.IneligibleReason != "" {
		c.fail("synthesis eligible message has ineligible_reason %q", r.IneligibleReason)
	}
	c.optToken("ineligible_reason", r.IneligibleReason, MaxTokenLen)
	c.optToken("thread_id", r.ThreadID, ids.MaxIDLen)
	validID(&c, "root_id", r.RootID, ids.ParseMessageID, true)
	validID(&c, "parent_id", r.ParentID, ids.ParseMessageID, true)
	switch {
	case len(r.MetadataJSON) > MaxMetadataBytes:
		c.fail("metadata_json is %d bytes, more than %d", len(r.MetadataJSON), MaxMetadataBytes)
	case !isJSONObject(r.MetadataJSON):
		c.fail("metadata_json is not a JSON object")
	}
	if !r.IngestPath.Valid() {
		c.fail("ingest_path %.40q is not one of event, reconcile, refresh, manual", r.IngestPath)
	}
	return c.err
}

// isJSONObject reports whether s is one valid JSON value that is an object.
func isJSONObject(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	return t != "" && t[0] == '{' && json.Valid([]byte(s))
}

var evidenceType = &recordType[EvidenceRecord]{
	name:     NameEvidenceRecord,
	topic:    DefaultEvidenceTopic,
	validate: (*EvidenceRecord).Validate,
	fast:     fastEvidence,
}

// NewEvidenceCodec returns the codec of EvidenceRecord values.
func NewEvidenceCodec(opts ...Option) (*Codec[EvidenceRecord], error) {
	return newCodec(evidenceType, opts)
}

// EvidenceRank orders the versions of one message's evidence the way the evidence
// table keeps them (internal/store's evidence version rule): a deleted version
// outranks every live one, and among versions that are both deleted or both live
// the later SourceUpdatedAt outranks the earlier. A version replaces the stored one
// when its content hash differs and its rank is not lower (Compare >= 0), so of two
// versions of equal rank the one that arrived later wins. Ranks are compared at
// millisecond precision, the precision the records carry.
type EvidenceRank struct {
	SourceUpdatedAt time.Time
	Deleted         bool
}

// Compare returns -1, 0 or +1 as r ranks below, equal to or above o.
func (r EvidenceRank) Compare(o EvidenceRank) int {
	switch {
	case r.Deleted != o.Deleted:
		if r.Deleted {
			return 1
		}
		return -1
	}
	a, b := r.SourceUpdatedAt.UnixMilli(), o.SourceUpdatedAt.UnixMilli()
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Replaces reports whether a version of rank r with content hash hash replaces a
// stored version of rank stored with content hash storedHash under the version
// rule: the hashes differ and r does not rank below stored.
func (r EvidenceRank) Replaces(hash string, stored EvidenceRank, storedHash string) bool {
	return hash != storedHash && r.Compare(stored) >= 0
}
