package normalize

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// sharedSamples is the reference sample directory of the project's shared/ tree, which
// lies beside the repository both here and in CI.
const sharedSamples = "../../../../shared/spec/reference/lark-samples"

const (
	testSelfAppID  = "cli_selfapp0001"
	testSelfBotID  = "ou_selfbot0001"
	testMessageID  = "om_test0001"
	testChatID     = "oc_chat0001"
	testSenderID   = "ou_sender0001"
	testMentionTom = "ou_tom0001"
)

var testCreateTime = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// readShared reads one file of the shared sample directory. A missing directory fails
// the test: these tests must not pass vacuously.
func readShared(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sharedSamples, name))
	if err != nil {
		t.Fatalf("reading shared sample %s (the shared/ tree must lie beside the repository): %v", name, err)
	}
	return string(b)
}

// readTestdata reads a sample copied into this package's testdata.
func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("reading testdata %s: %v", name, err)
	}
	return string(b)
}

func newTestNormalizer(t testing.TB) *Normalizer {
	t.Helper()
	n, err := New(Options{SelfAppID: testSelfAppID, SelfBotOpenID: testSelfBotID})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return n
}

// groupInput is a well-formed user message in a group chat, with one mention of Tom.
func groupInput(messageType, content string) Input {
	return Input{
		MessageID:   testMessageID,
		ChatID:      testChatID,
		ChatType:    ChatTypeGroup,
		SenderID:    testSenderID,
		SenderType:  SenderUser,
		MessageType: messageType,
		Content:     content,
		Mentions:    []Mention{{Key: "@_user_1", OpenID: testMentionTom, Name: "Tom"}},
		CreateTime:  testCreateTime,
	}
}

func mustNormalize(t testing.TB, n *Normalizer, in Input) Message {
	t.Helper()
	m, err := n.Normalize(in)
	if err != nil {
		t.Fatalf("Normalize(%s %s): %v", in.MessageType, in.MessageID, err)
	}
	return m
}

// checkMeta asserts that every key of want is in got with an equal value.
func checkMeta(t testing.TB, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("metadata %q missing; metadata = %v", k, got)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("metadata %q = %#v, want %#v", k, g, w)
		}
	}
}

// allowedMetaKeys is the metadata whitelist, spelled out independently of the code.
var allowedMetaKeys = map[string]bool{
	"chat_id": true, "chat_type": true, "thread_id": true, "root_id": true, "parent_id": true,
	"upper_message_id": true, "message_type": true, "sender_type": true, "sender_app_id": true,
	"edited": true, "deleted": true, "truncated": true, "text_bytes": true,
	"image_key": true, "image_keys": true, "file_key": true, "file_name": true,
	"media_file_keys": true, "duration_ms": true, "share_chat_id": true, "share_user_id": true,
	"task_id": true, "calendar_id": true, "calendar_event_id": true,
	"forwarded_message_ids": true, "mention_open_ids": true, "mention_all": true,
	"refs_truncated": true,
}

func checkWhitelisted(t testing.TB, md map[string]any) {
	t.Helper()
	for k, v := range md {
		if !allowedMetaKeys[k] {
			t.Errorf("metadata key %q (= %v) is not whitelisted", k, v)
		}
		switch v.(type) {
		case string, bool, int, int64, []string:
		default:
			t.Errorf("metadata %q has type %T", k, v)
		}
	}
}
