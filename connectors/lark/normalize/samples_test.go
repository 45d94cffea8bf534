package normalize

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/larkline/larkline/schemas"
)

type sampleCase struct {
	file        string
	messageType string
	wantText    string
	wantReason  string // schemas.IneligibleNone means eligible
	wantMeta    map[string]any
	absentMeta  []string
}

const sampleFileKey = "75235e0c-4f92-430a-a99b-8446610223cg"

// contentSampleCases covers every content_*.json of the shared sample directory, i.e.
// every content shape Lark documents; TestContentSamplesAllCovered keeps it complete.
var contentSampleCases = []sampleCase{
	{
		file: "content_text_docs.json", messageType: "text",
		wantText: "@Tom 文本消息",
		wantMeta: map[string]any{"message_type": "text", "mention_open_ids": []string{testMentionTom}},
	},
	{
		file: "content_post_docs.json", messageType: "post",
		wantText: "我是一个标题\n" +
			"第一行 :[超链接](http://www.larksuite.com)@Tom\n" +
			"[image]\n" +
			"第二行:文本测试\n" +
			"[image]\n" +
			"[video]\n" +
			"[SMILE]\n" +
			"---\n" +
			"```go\nfunc main() int64 {\n    return 0\n}\n```",
		wantMeta: map[string]any{
			"image_keys":      []string{"img_47354fbc-a159-40ed-86ab-2ad0f1acb42g", "img_47354fbc-a159-40ed-86ab-2ad0f1acb42g"},
			"media_file_keys": []string{"file_v2_0dcdd7d9-fib0-4432-a519-41d25aca542j"},
		},
	},
	{
		file: "content_post_locale_wrapped_cli.json", messageType: "post",
		wantText: "Weekly Update\nHello @Alice\n[Spec](https://example.com/spec)",
	},
	{
		file: "content_image_docs.json", messageType: "image",
		wantText: "[image]", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{"image_key": "img_4adb3cc3-902b-4187-b0f1-842f67fd017g"},
	},
	{
		file: "content_file_docs.json", messageType: "file",
		wantText: "[file] test.txt", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{"file_key": sampleFileKey, "file_name": "test.txt"},
	},
	{
		file: "content_folder_docs.json", messageType: "folder",
		wantText: "[folder] folder", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{"file_key": sampleFileKey, "file_name": "folder"},
	},
	{
		file: "content_audio_docs.json", messageType: "audio",
		wantText: "[audio] 2s", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{"file_key": sampleFileKey, "duration_ms": int64(2000)},
	},
	{
		file: "content_media_docs.json", messageType: "media",
		wantText: "[video] 测试视频.mp4 2s", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{
			"file_key": sampleFileKey, "image_key": "img_xxxxxx",
			"file_name": "测试视频.mp4", "duration_ms": int64(2000),
		},
	},
	{
		file: "content_media_docs.json", messageType: "video",
		wantText: "[video] 测试视频.mp4 2s", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{"file_key": sampleFileKey, "message_type": "video"},
	},
	{
		file: "content_sticker_docs.json", messageType: "sticker",
		wantText: "[sticker]", wantReason: schemas.IneligibleAttachmentOnly,
		wantMeta: map[string]any{"file_key": sampleFileKey},
	},
	{
		file: "content_interactive_docs.json", messageType: "interactive",
		wantText: "[card] 卡片标题", wantReason: schemas.IneligibleInteractiveCard,
		absentMeta: []string{"image_key", "image_keys"},
	},
	{
		file: "content_hongbao_docs.json", messageType: "hongbao",
		wantText: "[红包]", wantReason: schemas.IneligibleNonConversational,
	},
	{
		file: "content_share_calendar_event_docs.json", messageType: "share_calendar_event",
		wantText: "[shared calendar event] 日程分享测试 (2020-12-18 04:23 UTC – 2020-12-18 04:50 UTC)",
	},
	{
		file: "content_share_calendar_event_ids_cli.json", messageType: "share_calendar_event",
		// start_time/end_time of this sample are seconds, not milliseconds.
		wantText: "[shared calendar event] Review (2024-03-15 10:53 UTC – 2024-03-15 11:53 UTC)",
		wantMeta: map[string]any{"calendar_id": "cal_1", "calendar_event_id": "evt_1"},
	},
	{
		file: "content_calendar_docs.json", messageType: "calendar",
		wantText: "[calendar invitation] 日程邀请测试 (2020-12-18 04:23 UTC – 2020-12-18 04:50 UTC)",
	},
	{
		file: "content_general_calendar_docs.json", messageType: "general_calendar",
		wantText: "[calendar] 日程转让测试 (2020-12-18 04:23 UTC – 2020-12-18 04:50 UTC)",
	},
	{
		file: "content_share_chat_docs.json", messageType: "share_chat",
		wantText: "[shared chat] oc_0dd200d32fdaxxxxxxxx32f76", wantReason: schemas.IneligibleReferenceOnly,
		wantMeta: map[string]any{"share_chat_id": "oc_0dd200d32fdaxxxxxxxx32f76"},
	},
	{
		file: "content_share_user_docs.json", messageType: "share_user",
		wantText: "[shared user] ou_0dd200d32xxxxx6d2c2ef1ddb32f76", wantReason: schemas.IneligibleReferenceOnly,
		wantMeta: map[string]any{"share_user_id": "ou_0dd200d32xxxxx6d2c2ef1ddb32f76"},
	},
	{
		file: "content_system_invite_docs.json", messageType: "system",
		wantText: "botName invited 小明, 小王, 小红 to this chat.", wantReason: schemas.IneligibleSystem,
	},
	{
		file: "content_system_divider_docs.json", messageType: "system",
		wantText: "新会话", wantReason: schemas.IneligibleSystem,
	},
	{
		file: "content_location_docs.json", messageType: "location",
		wantText: "[location] xx省xx市", wantReason: schemas.IneligibleReferenceOnly,
		absentMeta: []string{"longitude", "latitude"},
	},
	{
		file: "content_video_chat_docs.json", messageType: "video_chat",
		wantText: "[video call] 视频通话消息 (2021-06-08 03:55 UTC)",
	},
	{
		file: "content_todo_docs.json", messageType: "todo",
		wantText: "[task] 多吃水果，多运动，健康生活，快乐工作。\ndue 2021-06-08 03:51 UTC",
		wantMeta: map[string]any{"task_id": "acd096a5-a157-4b9d-80e2-5b317456f005"},
	},
	{
		file: "content_vote_docs.json", messageType: "vote",
		wantText: "[vote] 投票测试: 选项1 / 选项2 / 选项3",
	},
	{
		file: "content_vote_closed_cli.json", messageType: "vote",
		wantText: "[vote] Lunch: A / B (closed)",
	},
	{
		file: "content_merge_forward_docs.json", messageType: "merge_forward",
		wantText: "[merged forward]", wantReason: schemas.IneligibleForwardContainer,
		absentMeta: []string{"forwarded_message_ids"},
	},
	{
		file: "content_merge_forward_legacy_ids_cli.json", messageType: "merge_forward",
		wantText: "[merged forward]", wantReason: schemas.IneligibleForwardContainer,
		wantMeta: map[string]any{"forwarded_message_ids": []string{"om_2", "om_1"}},
	},
}

func runSampleCase(t *testing.T, n *Normalizer, tc sampleCase, content string) {
	t.Helper()
	m := mustNormalize(t, n, groupInput(tc.messageType, content))
	if m.Text != tc.wantText {
		t.Errorf("Text =\n%q\nwant\n%q", m.Text, tc.wantText)
	}
	if m.IneligibleReason != tc.wantReason {
		t.Errorf("IneligibleReason = %q, want %q", m.IneligibleReason, tc.wantReason)
	}
	if m.SynthesisEligible != (tc.wantReason == schemas.IneligibleNone) {
		t.Errorf("SynthesisEligible = %v with reason %q", m.SynthesisEligible, m.IneligibleReason)
	}
	if m.MessageType != tc.messageType || m.Metadata["message_type"] != tc.messageType {
		t.Errorf("message type = %q / %v, want %q", m.MessageType, m.Metadata["message_type"], tc.messageType)
	}
	if len(m.ContentHash) != 64 {
		t.Errorf("ContentHash = %q, want 64 hex digits", m.ContentHash)
	}
	checkMeta(t, m.Metadata, tc.wantMeta)
	for _, k := range tc.absentMeta {
		if v, ok := m.Metadata[k]; ok {
			t.Errorf("metadata %q = %v, want absent", k, v)
		}
	}
	checkWhitelisted(t, m.Metadata)
	if strings.Contains(m.Text, "@_user_") {
		t.Errorf("Text %q leaks a mention placeholder", m.Text)
	}
}

func TestNormalizeContentSamples(t *testing.T) {
	n := newTestNormalizer(t)
	for _, tc := range contentSampleCases {
		t.Run(tc.messageType+"/"+tc.file, func(t *testing.T) {
			runSampleCase(t, n, tc, readShared(t, tc.file))
		})
	}
}

// TestNormalizeEmbeddedSamples runs the most important cases from copies in testdata,
// so they hold even without the shared/ tree.
func TestNormalizeEmbeddedSamples(t *testing.T) {
	n := newTestNormalizer(t)
	embedded := map[string]bool{}
	matches, err := filepath.Glob(filepath.Join("testdata", "content_*.json"))
	if err != nil || len(matches) == 0 {
		t.Fatalf("no embedded content samples (err %v)", err)
	}
	for _, f := range matches {
		embedded[filepath.Base(f)] = true
	}
	ran := 0
	for _, tc := range contentSampleCases {
		if !embedded[tc.file] {
			continue
		}
		ran++
		t.Run(tc.messageType+"/"+tc.file, func(t *testing.T) {
			runSampleCase(t, n, tc, readTestdata(t, tc.file))
		})
	}
	if ran != len(embedded) {
		t.Errorf("ran %d embedded cases for %d embedded content samples", ran, len(embedded))
	}
}

// TestContentSamplesAllCovered fails when a content sample is added to the shared
// directory without a case here, and when a message type Lark documents by sample is
// not supported.
func TestContentSamplesAllCovered(t *testing.T) {
	matches, err := filepath.Glob(filepath.Join(sharedSamples, "content_*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) < 20 {
		t.Fatalf("found %d content samples in %s; the shared/ tree must lie beside the repository", len(matches), sharedSamples)
	}
	covered := map[string]bool{}
	for _, tc := range contentSampleCases {
		covered[tc.file] = true
	}
	var missing []string
	for _, f := range matches {
		if !covered[filepath.Base(f)] {
			missing = append(missing, filepath.Base(f))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("content samples without a test case: %v", missing)
	}
	supported := map[string]bool{}
	for _, typ := range SupportedMessageTypes() {
		supported[typ] = true
	}
	for _, tc := range contentSampleCases {
		if !supported[tc.messageType] {
			t.Errorf("SupportedMessageTypes lacks %q", tc.messageType)
		}
	}
}
