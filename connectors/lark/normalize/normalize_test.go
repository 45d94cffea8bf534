package normalize

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr bool
		check   func(n *Normalizer) bool
	}{
		{"defaults", Options{SelfAppID: "cli_a"}, false, func(n *Normalizer) bool {
			return n.maxTextBytes == DefaultMaxTextBytes && n.maxContentBytes == DefaultMaxContentBytes
		}},
		{"explicit bounds", Options{SelfAppID: "cli_a", SelfBotOpenID: "ou_b", MaxTextBytes: 100, MaxContentBytes: 1000}, false,
			func(n *Normalizer) bool { return n.maxTextBytes == 100 && n.maxContentBytes == 1000 }},
		{"missing app id", Options{}, true, nil},
		{"app id with a slash", Options{SelfAppID: "cli/a"}, true, nil},
		{"bad bot open_id", Options{SelfAppID: "cli_a", SelfBotOpenID: "ou b"}, true, nil},
		{"text limit too small", Options{SelfAppID: "cli_a", MaxTextBytes: MinMaxTextBytes - 1}, true, nil},
		{"text limit too large", Options{SelfAppID: "cli_a", MaxTextBytes: MaxMaxTextBytes + 1}, true, nil},
		{"negative text limit", Options{SelfAppID: "cli_a", MaxTextBytes: -1}, true, nil},
		{"negative content limit", Options{SelfAppID: "cli_a", MaxContentBytes: -1}, true, nil},
		{"content limit too large", Options{SelfAppID: "cli_a", MaxContentBytes: MaxMaxContentBytes + 1}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := New(tc.opts)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidOptions) || n != nil {
					t.Fatalf("New = %v, %v; want ErrInvalidOptions", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(n) {
				t.Errorf("unexpected normalizer %+v", n)
			}
		})
	}
}

func TestNormalizeRejections(t *testing.T) {
	n, err := New(Options{SelfAppID: testSelfAppID, MaxContentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "SECRET-INCIDENT-TEXT"
	tests := []struct {
		name   string
		mutate func(in *Input)
		want   error
		reason string
	}{
		{"missing message id", func(in *Input) { in.MessageID = "" }, ErrMissingID, ReasonMissingID},
		{"message id without om_", func(in *Input) { in.MessageID = "msg_1" }, ErrInvalidID, ReasonInvalidID},
		{"message id with slash", func(in *Input) { in.MessageID = "om_a/b" }, ids.ErrInvalidID, ReasonInvalidID},
		{"missing chat id", func(in *Input) { in.ChatID = "" }, ErrMissingID, ReasonMissingID},
		{"chat id without oc_", func(in *Input) { in.ChatID = "chat_1" }, ErrInvalidID, ReasonInvalidID},
		{"overlong chat id", func(in *Input) { in.ChatID = "oc_" + strings.Repeat("a", 200) }, ErrInvalidID, ReasonInvalidID},
		{"bad thread id", func(in *Input) { in.ThreadID = "omt 1" }, ErrInvalidID, ReasonInvalidID},
		{"bad root id", func(in *Input) { in.RootID = "root" }, ErrInvalidID, ReasonInvalidID},
		{"bad parent id", func(in *Input) { in.ParentID = "om_" + secret + "/" }, ErrInvalidID, ReasonInvalidID},
		{"bad upper message id", func(in *Input) { in.UpperMessageID = "x" }, ErrInvalidID, ReasonInvalidID},
		{"p2p chat", func(in *Input) { in.ChatType = ChatTypeP2P }, ErrUnsupportedChatType, ReasonP2PChat},
		{"unknown chat type", func(in *Input) { in.ChatType = "channel" }, ErrUnsupportedChatType, ReasonUnsupportedChatType},
		{"user without open_id", func(in *Input) { in.SenderID = "" }, ErrMissingID, ReasonMissingID},
		{"app without any id", func(in *Input) { in.SenderID, in.SenderType = "", SenderApp }, ErrMissingID, ReasonMissingID},
		{"bad sender open_id", func(in *Input) { in.SenderID = "ou x" }, ErrInvalidID, ReasonInvalidID},
		{"bad sender app id", func(in *Input) { in.SenderAppID = "cli x" }, ErrInvalidID, ReasonInvalidID},
		{"unknown message type", func(in *Input) { in.MessageType = "hologram" }, ErrUnsupportedMessageType, ReasonUnsupportedType},
		{"empty message type", func(in *Input) { in.MessageType = "" }, ErrUnsupportedMessageType, ReasonUnsupportedType},
		{"bad JSON", func(in *Input) { in.Content = `{"text":"` + secret }, ErrMalformedContent, ReasonMalformedContent},
		{"content not an object", func(in *Input) { in.Content = `["` + secret + `"]` }, ErrMalformedContent, ReasonMalformedContent},
		{"content null", func(in *Input) { in.Content = `null` }, ErrMalformedContent, ReasonMalformedContent},
		{"content empty", func(in *Input) { in.Content = `` }, ErrMalformedContent, ReasonMalformedContent},
		{"content plain text", func(in *Input) { in.Content = secret }, ErrMalformedContent, ReasonMalformedContent},
		{"text of wrong JSON type", func(in *Input) { in.Content = `{"text":["` + secret + `"]}` }, ErrMalformedContent, ReasonMalformedContent},
		{"post paragraphs of wrong type", func(in *Input) {
			in.MessageType, in.Content = "post", `{"title":"`+secret+`","content":"`+secret+`"}`
		}, ErrMalformedContent, ReasonMalformedContent},
		{"audio duration as object", func(in *Input) {
			in.MessageType, in.Content = "audio", `{"file_key":"f","duration":{"ms":1}}`
		}, ErrMalformedContent, ReasonMalformedContent},
		{"system template of wrong type", func(in *Input) {
			in.MessageType, in.Content = "system", `{"template":1}`
		}, ErrMalformedContent, ReasonMalformedContent},
		{"content too large", func(in *Input) { in.Content = `{"text":"` + strings.Repeat("x", 5000) + `"}` }, ErrContentTooLarge, ReasonContentTooLarge},
		{"missing create time", func(in *Input) { in.CreateTime = time.Time{} }, ErrInvalidTimestamp, ReasonInvalidTimestamp},
		{"create time before 2000", func(in *Input) { in.CreateTime = time.Unix(1000, 0) }, ErrInvalidTimestamp, ReasonInvalidTimestamp},
		{"create time after 3000", func(in *Input) { in.CreateTime = time.Date(3001, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrInvalidTimestamp, ReasonInvalidTimestamp},
		{"update time after 3000", func(in *Input) { in.UpdateTime = time.Date(3001, 1, 1, 0, 0, 0, 0, time.UTC) }, ErrInvalidTimestamp, ReasonInvalidTimestamp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := groupInput("text", `{"text":"`+secret+`"}`)
			tc.mutate(&in)
			m, err := n.Normalize(in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if got := Reason(err); got != tc.reason {
				t.Errorf("Reason = %q, want %q", got, tc.reason)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q carries message text", err)
			}
			if m.MessageID != "" || m.Metadata != nil {
				t.Errorf("rejected message partly filled: %+v", m)
			}
		})
	}
}

func TestReasonLabels(t *testing.T) {
	if Reason(nil) != ReasonNone {
		t.Errorf("Reason(nil) = %q", Reason(nil))
	}
	if got := Reason(errors.New("boom")); got != ReasonOther {
		t.Errorf("foreign error: %q", got)
	}
	if got := Reason(fmt.Errorf("handler: %w", ErrMalformedEnvelope)); got != ReasonMalformedEnvelope {
		t.Errorf("wrapped envelope error: %q", got)
	}
	if got := Reason(ErrUnsupportedChatType); got != ReasonUnsupportedChatType {
		t.Errorf("bare chat type error: %q", got)
	}
}

func TestAcceptedChatTypesAndSenders(t *testing.T) {
	n := newTestNormalizer(t)
	tests := []struct {
		name   string
		mutate func(in *Input)
		check  func(t *testing.T, m Message)
	}{
		{"topic group", func(in *Input) { in.ChatType = ChatTypeTopicGroup }, func(t *testing.T, m Message) {
			if m.Metadata[schemas.MetaChatType] != ChatTypeTopicGroup {
				t.Errorf("chat_type %v", m.Metadata[schemas.MetaChatType])
			}
		}},
		{"chat type not reported (history)", func(in *Input) { in.ChatType = "" }, func(t *testing.T, m Message) {
			if _, ok := m.Metadata[schemas.MetaChatType]; ok {
				t.Error("chat_type present")
			}
		}},
		{"anonymous sender without id", func(in *Input) { in.SenderType, in.SenderID = SenderAnonymous, "" }, func(t *testing.T, m Message) {
			if m.SenderType != SenderAnonymous || m.SenderOpenID != "" || !m.SynthesisEligible {
				t.Errorf("%+v", m)
			}
		}},
		{"foreign sender type is mapped", func(in *Input) { in.SenderType = "bot" }, func(t *testing.T, m Message) {
			if m.SenderType != SenderApp || m.Metadata[schemas.MetaSenderType] != SenderApp {
				t.Errorf("sender type %q", m.SenderType)
			}
		}},
		{"other bot stays eligible", func(in *Input) { in.SenderType, in.SenderID, in.SenderAppID = SenderApp, "", "cli_alerts" }, func(t *testing.T, m Message) {
			if !m.SynthesisEligible || m.Metadata[schemas.MetaSenderAppID] != "cli_alerts" {
				t.Errorf("eligible %v metadata %v", m.SynthesisEligible, m.Metadata)
			}
		}},
		{"own app by app id", func(in *Input) { in.SenderType, in.SenderID, in.SenderAppID = SenderApp, "", testSelfAppID }, func(t *testing.T, m Message) {
			if m.SynthesisEligible || m.IneligibleReason != schemas.IneligibleOwnApp || m.Text == "" {
				t.Errorf("eligible %v reason %q text %q", m.SynthesisEligible, m.IneligibleReason, m.Text)
			}
		}},
		{"own bot by open_id", func(in *Input) { in.SenderType, in.SenderID = SenderApp, testSelfBotID }, func(t *testing.T, m Message) {
			if m.SynthesisEligible || m.IneligibleReason != schemas.IneligibleOwnApp {
				t.Errorf("eligible %v reason %q", m.SynthesisEligible, m.IneligibleReason)
			}
		}},
		{"ids, thread and times are carried", func(in *Input) {
			in.ThreadID, in.RootID, in.ParentID = "omt_1", "om_root", "om_parent"
			in.CreateTime = time.Date(2026, 3, 1, 20, 0, 0, 0, time.FixedZone("X", 8*3600))
			in.UpdateTime = in.CreateTime.Add(time.Minute)
			in.Updated = true
		}, func(t *testing.T, m Message) {
			if m.ThreadID != "omt_1" || m.RootID != "om_root" || m.ParentID != "om_parent" {
				t.Errorf("ids %q %q %q", m.ThreadID, m.RootID, m.ParentID)
			}
			if m.CreatedAt != time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) || m.UpdatedAt != m.CreatedAt.Add(time.Minute) {
				t.Errorf("times %v %v", m.CreatedAt, m.UpdatedAt)
			}
			checkMeta(t, m.Metadata, map[string]any{"thread_id": "omt_1", "root_id": "om_root", "parent_id": "om_parent", "edited": true})
		}},
		{"update time before create time is clamped", func(in *Input) { in.UpdateTime = in.CreateTime.Add(-time.Hour) }, func(t *testing.T, m Message) {
			if !m.UpdatedAt.Equal(m.CreatedAt) {
				t.Errorf("UpdatedAt %v, CreatedAt %v", m.UpdatedAt, m.CreatedAt)
			}
		}},
		{"whitespace-only text is ineligible", func(in *Input) { in.Content = `{"text":" \n\t "}` }, func(t *testing.T, m Message) {
			if m.Text != "" || m.SynthesisEligible || m.IneligibleReason != schemas.IneligibleEmptyText {
				t.Errorf("text %q eligible %v reason %q", m.Text, m.SynthesisEligible, m.IneligibleReason)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := groupInput("text", `{"text":"db failover done"}`)
			tc.mutate(&in)
			m := mustNormalize(t, n, in)
			checkWhitelisted(t, m.Metadata)
			tc.check(t, m)
		})
	}
}

func TestMentionsRenderedToNames(t *testing.T) {
	n := newTestNormalizer(t)
	mentions := []Mention{
		{Key: "@_user_1", OpenID: "ou_alice", Name: "Alice"},
		{Key: "@_user_10", OpenID: "ou_judy", Name: "Judy"},
		{Key: "@_user_2", OpenID: "ou_nameless"},
		{Key: "@_user_3", OpenID: "ou_evil", Name: "Ev\x00il\u200b\nName"},
		{Key: "@_user_4", OpenID: "ou_alice", Name: "Alice again"},
	}
	tests := []struct {
		name, typ, content string
		want               string
		wantAll            bool
	}{
		{"single", "text", `{"text":"@_user_1 please check"}`, "@Alice please check", false},
		{"user_10 is not user_1 followed by 0", "text", `{"text":"@_user_10 and @_user_1"}`, "@Judy and @Alice", false},
		{"adjacent letters", "text", `{"text":"@_user_1abc"}`, "@Aliceabc", false},
		{"adjacent CJK", "text", `{"text":"@_user_1你好"}`, "@Alice你好", false},
		{"mention without name", "text", `{"text":"@_user_2 hi"}`, "@user hi", false},
		{"mention missing from list", "text", `{"text":"@_user_9 hi"}`, "@user hi", false},
		{"all", "text", `{"text":"@_all outage"}`, "@all outage", true},
		{"control characters in a name are dropped", "text", `{"text":"@_user_3"}`, "@Evil\u200b Name", false},
		{"not a placeholder", "text", `{"text":"mail a@_b and @_user_ and @_"}`, "mail a@_b and @_user_ and @_", false},
		{"post at tag via mentions", "post", `{"title":"","content":[[{"tag":"at","user_id":"@_user_10","user_name":""},{"tag":"text","text":" ok"}]]}`, "@Judy ok", false},
		{"post at tag with its own name", "post", `{"content":[[{"tag":"at","user_id":"ou_x","user_name":"Zed"}]]}`, "@Zed", false},
		{"post at all", "post", `{"content":[[{"tag":"at","user_id":"all"},{"tag":"text","text":" deploy"}]]}`, "@all deploy", true},
		{"post text element with placeholder", "post", `{"content":[[{"tag":"text","text":"cc @_user_1"}]]}`, "cc @Alice", false},
		{"post title with placeholder", "post", `{"title":"for @_user_2","content":[]}`, "for @user", false},
		{"vote topic", "vote", `{"topic":"@_user_1 decides","options":["a"]}`, "[vote] @Alice decides: a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := groupInput(tc.typ, tc.content)
			in.Mentions = mentions
			m := mustNormalize(t, n, in)
			if m.Text != tc.want {
				t.Errorf("Text = %q, want %q", m.Text, tc.want)
			}
			if (m.Metadata[schemas.MetaMentionAll] == true) != tc.wantAll {
				t.Errorf("mention_all = %v, want %v", m.Metadata[schemas.MetaMentionAll], tc.wantAll)
			}
			checkMeta(t, m.Metadata, map[string]any{
				schemas.MetaMentionOpenIDs: []string{"ou_alice", "ou_judy", "ou_nameless", "ou_evil"},
			})
		})
	}
}

func TestPostShapes(t *testing.T) {
	n := newTestNormalizer(t)
	tests := []struct {
		name, content, want string
		meta                map[string]any
	}{
		{"locale-wrapped under post key", `{"post":{"en_us":{"title":"T","content":[[{"tag":"text","text":"x"}]]}}}`, "T\nx", nil},
		{"zh_cn preferred over en_us", `{"en_us":{"title":"EN","content":[]},"zh_cn":{"title":"中文","content":[]}}`, "中文", nil},
		{"empty zh_cn falls back to en_us", `{"zh_cn":{"title":"","content":[]},"en_us":{"title":"EN","content":[]}}`, "EN", nil},
		{"other locale used when no known one", `{"fr_fr":{"title":"FR","content":[]}}`, "FR", nil},
		{"empty object", `{}`, "", nil},
		{"un_escape", `{"content":[[{"tag":"text","text":"a &lt; b","un_escape":true},{"tag":"text","text":" &amp;"}]]}`, "a < b &amp;", nil},
		{"md tag and unknown tag keep text", `{"content":[[{"tag":"md","text":"**bold**"},{"tag":"sparkle","text":" new"},{"tag":"sparkle"}]]}`, "**bold** new", nil},
		{"link without text", `{"content":[[{"tag":"a","href":"https://x.test/a"}]]}`, "https://x.test/a", nil},
		{"link equal to its text", `{"content":[[{"tag":"a","href":"https://x.test","text":"https://x.test"}]]}`, "https://x.test", nil},
		{"image between words", `{"content":[[{"tag":"text","text":"see"},{"tag":"img","image_key":"img_1"},{"tag":"text","text":"here"}]]}`, "see [image] here",
			map[string]any{"image_keys": []string{"img_1"}}},
		{"invalid image key is not kept", `{"content":[[{"tag":"img","image_key":"img 1"}]]}`, "[image]", nil},
		{"null paragraph and element", `{"content":[null,[null,{"tag":"text","text":"ok"}]]}`, "ok", nil},
		{"empty paragraphs collapse", `{"title":"T","content":[[],[],[{"tag":"text","text":"x"}]]}`, "T\nx", nil},
		{"code block keeps indentation", `{"content":[[{"tag":"code_block","language":"PYTHON","text":"if x:\n    y()"}]]}`, "```python\nif x:\n    y()\n```", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNormalize(t, n, groupInput("post", tc.content))
			if m.Text != tc.want {
				t.Errorf("Text = %q, want %q", m.Text, tc.want)
			}
			checkMeta(t, m.Metadata, tc.meta)
		})
	}
}

func TestCardShapes(t *testing.T) {
	n := newTestNormalizer(t)
	tests := []struct{ name, content, want string }{
		{"received shape", `{"title":"Incident #42","elements":[[{"tag":"text","text":"secret body"}]]}`, "[card] Incident #42"},
		{"original card JSON header", `{"header":{"title":{"tag":"plain_text","content":"Overview"}},"elements":[]}`, "[card] Overview"},
		{"title object", `{"title":{"content":"Obj"}}`, "[card] Obj"},
		{"no title (history docs shape)", `{"text":"test content"}`, "[card]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNormalize(t, n, groupInput("interactive", tc.content))
			if m.Text != tc.want || m.SynthesisEligible || m.IneligibleReason != schemas.IneligibleInteractiveCard {
				t.Errorf("Text %q eligible %v reason %q", m.Text, m.SynthesisEligible, m.IneligibleReason)
			}
		})
	}
}

func TestOtherShapes(t *testing.T) {
	n := newTestNormalizer(t)
	tests := []struct{ name, typ, content, want string }{
		{"merge_forward plain-text content", "merge_forward", "Merged and Forwarded Message", "[merged forward]"},
		{"audio duration as string", "audio", `{"file_key":"f_1","duration":"61500"}`, "[audio] 1m2s"},
		{"audio without duration", "audio", `{"file_key":"f_1"}`, "[audio]"},
		{"system with unknown variable and stray braces", "system", `{"template":"{from_user} renamed to {new} {not a var} {","from_user":["A"]}`, "A renamed to  {not a var} {"},
		{"system with i18n-only divider", "system", `{"template":"{divider_text}","divider_text":{"i18n_text":{"en_us":"New"}}}`, "New"},
		{"system with a number", "system", `{"template":"{n} joined","n":3}`, "3 joined"},
		{"todo with string summary", "todo", `{"task_id":"t1","summary":"ship it"}`, "[task] ship it"},
		{"vote open", "vote", `{"topic":"Go?","options":["yes","no"],"status":0}`, "[vote] Go?: yes / no"},
		{"hongbao without text", "hongbao", `{}`, "[red packet]"},
		{"calendar without times", "calendar", `{"summary":"Review"}`, "[calendar invitation] Review"},
		{"share_chat with invalid id keeps no id", "share_chat", `{"chat_id":"oc x"}`, "[shared chat]"},
		{"text with CRLF, controls, bad UTF-8", "text", "{\"text\":\"  a\\r\\nb\\u0000c\\u0007\\u0085d\xff  \"}", "a\nbcd\uFFFD"},
		{"text with ideographic spaces trimmed", "text", `{"text":"　中文　"}`, "中文"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustNormalize(t, n, groupInput(tc.typ, tc.content))
			if m.Text != tc.want {
				t.Errorf("Text = %q, want %q", m.Text, tc.want)
			}
			checkWhitelisted(t, m.Metadata)
		})
	}
}

func TestTruncationAtRuneBoundaries(t *testing.T) {
	// 3-byte runes: every limit from 64 to 80 cuts at a different offset within a rune.
	long := strings.Repeat("数据库主从切换完成", 20) // 540 bytes
	for limit := MinMaxTextBytes; limit <= MinMaxTextBytes+16; limit++ {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			n, err := New(Options{SelfAppID: testSelfAppID, MaxTextBytes: limit})
			if err != nil {
				t.Fatal(err)
			}
			m := mustNormalize(t, n, groupInput("text", `{"text":"`+long+`"}`))
			if len(m.Text) > limit {
				t.Errorf("len(Text) = %d > %d", len(m.Text), limit)
			}
			if !utf8.ValidString(m.Text) {
				t.Errorf("Text is not valid UTF-8: %q", m.Text)
			}
			body, ok := strings.CutSuffix(m.Text, TruncationMarker)
			if !ok {
				t.Fatalf("Text %q lacks the truncation marker", m.Text)
			}
			if !strings.HasPrefix(long, body) || len(body) < limit-len(TruncationMarker)-utf8.UTFMax {
				t.Errorf("kept %q: not the longest rune-aligned prefix", body)
			}
			if m.Metadata[schemas.MetaTruncated] != true || m.Metadata[schemas.MetaTextBytes] != len(long) {
				t.Errorf("metadata %v", m.Metadata)
			}
		})
	}

	t.Run("exactly at the limit is not truncated", func(t *testing.T) {
		n, err := New(Options{SelfAppID: testSelfAppID, MaxTextBytes: 66})
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Repeat("中", 22) // 66 bytes
		m := mustNormalize(t, n, groupInput("text", `{"text":"`+text+`"}`))
		if m.Text != text {
			t.Errorf("Text = %q", m.Text)
		}
		if _, ok := m.Metadata[schemas.MetaTruncated]; ok {
			t.Error("truncated flag set")
		}
	})

	t.Run("edit past the limit changes the hash", func(t *testing.T) {
		n, err := New(Options{SelfAppID: testSelfAppID, MaxTextBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		a := mustNormalize(t, n, groupInput("text", `{"text":"`+long+`A"}`))
		b := mustNormalize(t, n, groupInput("text", `{"text":"`+long+`B"}`))
		if a.Text != b.Text {
			t.Fatalf("stored texts differ: %q / %q", a.Text, b.Text)
		}
		if a.ContentHash == b.ContentHash {
			t.Error("an edit past the text limit left the hash unchanged")
		}
	})

	t.Run("default limit bounds a long post", func(t *testing.T) {
		n := newTestNormalizer(t)
		para := `[{"tag":"text","text":"` + strings.Repeat("告警", 100) + `"}]`
		content := `{"title":"x","content":[` + strings.TrimSuffix(strings.Repeat(para+",", 50), ",") + `]}`
		m := mustNormalize(t, n, groupInput("post", content))
		if len(m.Text) > DefaultMaxTextBytes || !strings.HasSuffix(m.Text, TruncationMarker) || !utf8.ValidString(m.Text) {
			t.Errorf("len %d, suffix ok %v", len(m.Text), strings.HasSuffix(m.Text, TruncationMarker))
		}
	})
}

func TestContentHash(t *testing.T) {
	n := newTestNormalizer(t)
	base := groupInput("text", `{"text":"@_user_1 restart api"}`)
	ref := mustNormalize(t, n, base)

	same := []struct {
		name   string
		mutate func(in *Input)
	}{
		{"identical redelivery", func(in *Input) {}},
		{"other timestamps", func(in *Input) {
			in.CreateTime, in.UpdateTime = in.CreateTime.Add(time.Hour), in.CreateTime.Add(2*time.Hour)
		}},
		{"other ids and thread", func(in *Input) {
			in.MessageID, in.ChatID, in.ThreadID, in.RootID = "om_other", "oc_other", "omt_x", "om_r"
		}},
		{"other sender", func(in *Input) { in.SenderID = "ou_other" }},
		{"chat type not reported", func(in *Input) { in.ChatType = "" }},
		{"edited flag alone", func(in *Input) { in.Updated = true }},
		{"equivalent JSON formatting", func(in *Input) { in.Content = "{ \"text\" : \"@_user_1 restart api\" , \"extra\":1 }" }},
		{"surrounding white space", func(in *Input) { in.Content = `{"text":"  @_user_1 restart api\n"}` }},
		{"mention id differs but name is the same", func(in *Input) { in.Mentions = []Mention{{Key: "@_user_1", OpenID: "ou_tom2", Name: "Tom"}} }},
	}
	for _, tc := range same {
		t.Run("same/"+tc.name, func(t *testing.T) {
			in := base
			tc.mutate(&in)
			if m := mustNormalize(t, n, in); m.ContentHash != ref.ContentHash {
				t.Errorf("hash changed: %s != %s", m.ContentHash, ref.ContentHash)
			}
		})
	}

	different := []struct {
		name   string
		mutate func(in *Input)
	}{
		{"edited text", func(in *Input) { in.Content = `{"text":"@_user_1 restart api now"}` }},
		{"other mention name", func(in *Input) { in.Mentions = []Mention{{Key: "@_user_1", OpenID: testMentionTom, Name: "Tim"}} }},
		{"deleted", func(in *Input) { in.Deleted = true }},
		{"other type, same text", func(in *Input) {
			in.MessageType, in.Content = "post", `{"content":[[{"tag":"text","text":"@_user_1 restart api"}]]}`
		}},
	}
	for _, tc := range different {
		t.Run("different/"+tc.name, func(t *testing.T) {
			in := base
			tc.mutate(&in)
			if m := mustNormalize(t, n, in); m.ContentHash == ref.ContentHash {
				t.Errorf("hash unchanged: %s", m.ContentHash)
			}
		})
	}

	t.Run("different/attachment key", func(t *testing.T) {
		a := mustNormalize(t, n, groupInput("image", `{"image_key":"img_a"}`))
		b := mustNormalize(t, n, groupInput("image", `{"image_key":"img_b"}`))
		if a.Text != b.Text || a.ContentHash == b.ContentHash {
			t.Errorf("texts %q/%q hashes %s/%s", a.Text, b.Text, a.ContentHash, b.ContentHash)
		}
	})
	t.Run("different/file name", func(t *testing.T) {
		a := mustNormalize(t, n, groupInput("file", `{"file_key":"f","file_name":"a.log"}`))
		b := mustNormalize(t, n, groupInput("file", `{"file_key":"f","file_name":"b.log"}`))
		if a.ContentHash == b.ContentHash {
			t.Error("hash unchanged")
		}
	})
}

// TestContentHashGolden pins the canonical encoding: stored hashes must not change
// between releases unless hashDomain changes. The expected value is recomputed here
// from the documented encoding, independently of contentHash.
func TestContentHashGolden(t *testing.T) {
	n := newTestNormalizer(t)
	m := mustNormalize(t, n, groupInput("image", `{"image_key":"img_a"}`))

	field := func(b []byte, s string) []byte {
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	textSum := sha256.Sum256([]byte("[image]"))
	var enc []byte
	enc = field(enc, "larkline/lark-message-content/v1")
	enc = field(enc, "image")
	enc = append(enc, textSum[:]...)
	enc = binary.AppendUvarint(enc, 1)
	enc = field(enc, "image_key")
	enc = field(enc, "img_a")
	enc = append(enc, 0)
	sum := sha256.Sum256(enc)
	if want := hex.EncodeToString(sum[:]); m.ContentHash != want {
		t.Errorf("ContentHash = %s, want %s", m.ContentHash, want)
	}
}

func TestRedact(t *testing.T) {
	n := newTestNormalizer(t)
	in := groupInput("file", `{"file_key":"f_1","file_name":"postmortem.pdf"}`)
	in.ThreadID, in.RootID, in.ParentID = "omt_1", "om_root", "om_parent"
	orig := mustNormalize(t, n, in)
	recalled := orig.UpdatedAt.Add(5 * time.Minute)

	r := Redact(orig, recalled)
	if r.Text != "" || !r.Deleted || r.SynthesisEligible || r.IneligibleReason != schemas.IneligibleDeleted {
		t.Errorf("redacted: %+v", r)
	}
	if r.ContentHash == orig.ContentHash {
		t.Error("redaction kept the hash")
	}
	if !r.UpdatedAt.Equal(recalled) || !r.CreatedAt.Equal(orig.CreatedAt) {
		t.Errorf("times: created %v updated %v", r.CreatedAt, r.UpdatedAt)
	}
	if r.MessageID != orig.MessageID || r.ChatID != orig.ChatID || r.SenderOpenID != orig.SenderOpenID {
		t.Error("identity lost")
	}
	want := map[string]any{
		"chat_id": testChatID, "chat_type": "group", "thread_id": "omt_1", "root_id": "om_root",
		"parent_id": "om_parent", "message_type": "file", "sender_type": "user", "deleted": true,
	}
	if len(r.Metadata) != len(want) {
		t.Errorf("metadata = %v, want exactly %v", r.Metadata, want)
	}
	checkMeta(t, r.Metadata, want)
	if _, ok := orig.Metadata[schemas.MetaFileName]; !ok {
		t.Error("Redact mutated the original's metadata")
	}

	t.Run("idempotent", func(t *testing.T) {
		again := Redact(r, time.Time{})
		if again.ContentHash != r.ContentHash || !again.UpdatedAt.Equal(r.UpdatedAt) {
			t.Errorf("second redaction differs: %s %v", again.ContentHash, again.UpdatedAt)
		}
	})
	t.Run("earlier recall time does not move UpdatedAt back", func(t *testing.T) {
		if got := Redact(orig, orig.CreatedAt.Add(-time.Hour)); !got.UpdatedAt.Equal(orig.UpdatedAt) {
			t.Errorf("UpdatedAt %v", got.UpdatedAt)
		}
	})
	t.Run("history deleted item equals a redaction", func(t *testing.T) {
		del := in
		del.ChatType = ChatTypeGroup
		del.Deleted = true
		del.Content = "This message was recalled" // not JSON: must not matter
		h := mustNormalize(t, n, del)
		if h.ContentHash != r.ContentHash || h.Text != "" || !h.Deleted || h.IneligibleReason != schemas.IneligibleDeleted {
			t.Errorf("history deleted: %+v", h)
		}
		checkMeta(t, h.Metadata, want)
	})
	t.Run("edits of a message redact to the same hash", func(t *testing.T) {
		edited := in
		edited.Content = `{"file_key":"f_2","file_name":"other.pdf"}`
		if got := Redact(mustNormalize(t, n, edited), recalled); got.ContentHash != r.ContentHash {
			t.Error("redactions of two versions differ")
		}
	})
	t.Run("deleted message of an unsupported type is still skipped", func(t *testing.T) {
		del := in
		del.Deleted, del.MessageType = true, "hologram"
		if _, err := n.Normalize(del); !errors.Is(err, ErrUnsupportedMessageType) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestParseTimestamp(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"", time.Time{}, false},
		{"1710500000", time.Unix(1710500000, 0), false},
		{"1609073151345", time.UnixMilli(1609073151345), false},
		{" 1609073151345 ", time.UnixMilli(1609073151345), false},
		{"1603977298000000", time.UnixMicro(1603977298000000), false},
		{"1603977298000000123", time.Unix(0, 1603977298000000123), false},
		{"0", time.Time{}, true},
		{"-5", time.Time{}, true},
		{"1.5e12", time.Time{}, true},
		{"soon", time.Time{}, true},
		{"99999999999999999999", time.Time{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTimestamp(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidTimestamp) {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) || (!got.IsZero() && got.Location() != time.UTC) {
				t.Errorf("ParseTimestamp = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestNormalizerConcurrentUse(t *testing.T) {
	n := newTestNormalizer(t)
	content := readTestdata(t, "content_post_docs.json")
	want := mustNormalize(t, n, groupInput("post", content))
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				m, err := n.Normalize(groupInput("post", content))
				if err != nil || m.ContentHash != want.ContentHash || m.Text != want.Text {
					errs <- fmt.Sprintf("err %v hash %s", err, m.ContentHash)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func BenchmarkNormalizePost(b *testing.B) {
	n := newTestNormalizer(b)
	in := groupInput("post", readTestdata(b, "content_post_docs.json"))
	b.ReportAllocs()
	b.SetBytes(int64(len(in.Content)))
	for b.Loop() {
		if _, err := n.Normalize(in); err != nil {
			b.Fatal(err)
		}
	}
}
