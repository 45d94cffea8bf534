package normalize

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/schemas"
)

func decodeReceiveEvent(t testing.TB, body string) *larkim.P2MessageReceiveV1 {
	t.Helper()
	var ev larkim.P2MessageReceiveV1
	if err := json.Unmarshal([]byte(body), &ev); err != nil {
		t.Fatalf("decoding receive event: %v", err)
	}
	return &ev
}

// decodeEventBodyOnly wraps a sample that holds only the "event" object.
func decodeEventBodyOnly(t testing.TB, body string) *larkim.P2MessageReceiveV1 {
	t.Helper()
	var data larkim.P2MessageReceiveV1Data
	if err := json.Unmarshal([]byte(body), &data); err != nil {
		t.Fatalf("decoding event body: %v", err)
	}
	return &larkim.P2MessageReceiveV1{Event: &data}
}

func decodeHistoryItems(t testing.TB, body string) []*larkim.Message {
	t.Helper()
	var resp larkim.ListMessageResp
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("decoding history response: %v", err)
	}
	if resp.Data == nil || len(resp.Data.Items) == 0 {
		t.Fatal("history response has no items")
	}
	return resp.Data.Items
}

func TestFromReceiveEventSamples(t *testing.T) {
	n := newTestNormalizer(t)
	tests := []struct {
		name       string
		event      func(t testing.TB) *larkim.P2MessageReceiveV1
		wantInput  Input
		wantText   string
		wantReason string // rejection label; "" when accepted
	}{
		{
			name: "docs group text with thread and mention (embedded)",
			event: func(t testing.TB) *larkim.P2MessageReceiveV1 {
				return decodeReceiveEvent(t, readTestdata(t, "event_receive_v1_text_group_docs.json"))
			},
			wantInput: Input{
				MessageID: "om_5ce6d572455d361153b7cb51da133945", ChatID: "oc_5ce6d572455d361153b7xx51da133945",
				ChatType: "group", ThreadID: "omt_d4be107c616",
				RootID: "om_5ce6d572455d361153b7cb5xxfsdfsdfdsf", ParentID: "om_5ce6d572455d361153b7cb5xxfsdfsdfdsf",
				SenderID: "ou_84aad35d084aa403a838cf73ee18467", SenderType: SenderUser,
				MessageType: "text", Content: `{"text":"@_user_1 hello"}`,
				Mentions:   []Mention{{Key: "@_user_1", OpenID: "ou_84aad35d084aa403a838cf73ee18467", Name: "Tom"}},
				CreateTime: time.UnixMilli(1609073151345).UTC(), UpdateTime: time.UnixMilli(1687343654666).UTC(),
			},
			wantText: "@Tom hello",
		},
		{
			name: "real group mention, empty user_id, no update_time",
			event: func(t testing.TB) *larkim.P2MessageReceiveV1 {
				return decodeReceiveEvent(t, readShared(t, "event_receive_v1_text_group_mention_real_microjservice.json"))
			},
			wantInput: Input{
				MessageID: "om_b651c203420c18fa527e349991eff1f7", ChatID: "oc_87d7e55fa83069ec9aab69dfb5dec374",
				ChatType: "group", SenderID: "ou_eda08fd6c2374597cdf3f9154526e456", SenderType: SenderUser,
				MessageType: "text", Content: `{"text":"@_user_1 "}`,
				Mentions:   []Mention{{Key: "@_user_1", OpenID: "ou_513116e20e172e7da9084e25ff9eb200", Name: "Test"}},
				CreateTime: time.UnixMilli(1620531588352).UTC(),
			},
			wantText: "@Test",
		},
		{
			name: "real capture with redacted ids is rejected as invalid id",
			event: func(t testing.TB) *larkim.P2MessageReceiveV1 {
				return decodeReceiveEvent(t, readShared(t, "event_receive_v1_text_group_real_nonebot_1.json"))
			},
			wantInput: Input{
				MessageID: "om_b9c9da5***7d74a", ChatID: "oc_b5fc2808***5970", ChatType: "group",
				SenderID: "ou_23e65b***4fd28", SenderType: SenderUser, MessageType: "text",
				Content:    `{"text":"bot /say 12345"}`,
				CreateTime: time.UnixMilli(1708251664735).UTC(), UpdateTime: time.UnixMilli(1708251664735).UTC(),
			},
			wantReason: ReasonInvalidID,
		},
		{
			name: "capture with placeholder ids is rejected as invalid id",
			event: func(t testing.TB) *larkim.P2MessageReceiveV1 {
				return decodeReceiveEvent(t, readShared(t, "event_receive_v1_text_group_mention_real_nonebot_2.json"))
			},
			wantInput: Input{
				MessageID: "message_id", ChatID: "chat_id", ChatType: "group",
				SenderID: "sender_open_id", SenderType: SenderUser, MessageType: "text",
				Content:    `{"text":"@_user_1 /say 34567"}`,
				Mentions:   []Mention{{Key: "@_user_1", OpenID: "open_id", Name: "bot"}},
				CreateTime: time.UnixMilli(1708399532591).UTC(), UpdateTime: time.UnixMilli(1708399532591).UTC(),
			},
			wantReason: ReasonInvalidID,
		},
		{
			name: "p2p event body is rejected (embedded)",
			event: func(t testing.TB) *larkim.P2MessageReceiveV1 {
				return decodeEventBodyOnly(t, readTestdata(t, "event_receive_v1_body_only_text_p2p_golark.json"))
			},
			wantInput: Input{
				MessageID: "om_6ff2cff41a3e9248bbb19bf0e4762e6e", ChatID: "oc_ae7f3952a9b28588aeac46c9853d25d3",
				ChatType: "p2p", SenderID: "ou_4f75b532aff410181e93552ad0532072", SenderType: SenderUser,
				MessageType: "text", Content: `{"text":"333"}`,
				CreateTime: time.UnixMilli(1641385820771).UTC(),
			},
			wantReason: ReasonP2PChat,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := FromReceiveEvent(tc.event(t))
			if err != nil {
				t.Fatalf("FromReceiveEvent: %v", err)
			}
			if !reflect.DeepEqual(in, tc.wantInput) {
				t.Errorf("Input =\n%+v\nwant\n%+v", in, tc.wantInput)
			}
			m, err := n.Normalize(in)
			if got := Reason(err); got != tc.wantReason {
				t.Fatalf("Normalize reason = %q (err %v), want %q", got, err, tc.wantReason)
			}
			if err == nil && m.Text != tc.wantText {
				t.Errorf("Text = %q, want %q", m.Text, tc.wantText)
			}
		})
	}
}

func TestFromReceiveEventEnvelopeErrors(t *testing.T) {
	bad := "1e9"
	tests := []struct {
		name string
		ev   *larkim.P2MessageReceiveV1
		want error
	}{
		{"nil event", nil, ErrMalformedEnvelope},
		{"no data", &larkim.P2MessageReceiveV1{}, ErrMalformedEnvelope},
		{"no message", &larkim.P2MessageReceiveV1{Event: &larkim.P2MessageReceiveV1Data{}}, ErrMalformedEnvelope},
		{"bad create_time", &larkim.P2MessageReceiveV1{Event: &larkim.P2MessageReceiveV1Data{
			Message: &larkim.EventMessage{CreateTime: &bad},
		}}, ErrInvalidTimestamp},
		{"bad update_time", &larkim.P2MessageReceiveV1{Event: &larkim.P2MessageReceiveV1Data{
			Message: &larkim.EventMessage{UpdateTime: &bad},
		}}, ErrInvalidTimestamp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromReceiveEvent(tc.ev)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFromReceiveEventBotSender(t *testing.T) {
	for _, senderType := range []string{"bot", "app"} {
		t.Run(senderType, func(t *testing.T) {
			body := `{"event":{"sender":{"sender_id":{"open_id":"` + testSelfBotID + `"},"sender_type":"` + senderType + `"},
			"message":{"message_id":"om_bot1","chat_id":"oc_chat1","chat_type":"group","message_type":"text",
			"content":"{\"text\":\"overview\"}","create_time":"1700000000000"}}}`
			in, err := FromReceiveEvent(decodeReceiveEvent(t, body))
			if err != nil {
				t.Fatal(err)
			}
			if in.SenderType != SenderApp || in.SenderID != testSelfBotID {
				t.Fatalf("sender = %q %q", in.SenderType, in.SenderID)
			}
			m := mustNormalize(t, newTestNormalizer(t), in)
			if m.SynthesisEligible || m.IneligibleReason != schemas.IneligibleOwnApp {
				t.Errorf("own bot message: eligible %v reason %q", m.SynthesisEligible, m.IneligibleReason)
			}
			if m.Text != "overview" {
				t.Errorf("own message must stay as evidence with its text; Text = %q", m.Text)
			}
		})
	}
}

func TestFromHistoryMessageSamples(t *testing.T) {
	const docsApp = "cli_9f427eec54ae901b"
	wantBase := Input{
		MessageID: "om_dc13264520392913993dd051dba21dcf", ChatID: "oc_5ad11d72b830411d72b836c20",
		ThreadID: "omt_d4be107c616a", RootID: "om_40eb06e7b84dc71c03e009ad3c754195",
		ParentID: "om_d4be107c616aed9c1da8ed8068570a9f", UpperMessageID: "om_40eb06e7b84dc71c03e009ad3c754195",
		SenderAppID: docsApp, SenderType: SenderApp, Content: `{"text":"test content"}`,
		Mentions:   []Mention{{Key: "@_user_1", OpenID: "ou_155184d1e73cbfb8973e5a9e698e74f2", Name: "Tom"}},
		CreateTime: time.UnixMilli(1615380573411).UTC(), UpdateTime: time.UnixMilli(1615380573411).UTC(),
	}
	tests := []struct {
		name       string
		body       func(t testing.TB) string
		selfApp    string
		wantType   string
		wantText   string
		wantReason string
	}{
		{
			name: "list item: interactive card from another app (embedded)", body: func(t testing.TB) string { return readTestdata(t, "api_list_messages_response_docs.json") },
			selfApp: testSelfAppID, wantType: "interactive", wantText: "[card]", wantReason: schemas.IneligibleInteractiveCard,
		},
		{
			name: "list item: card from our own app", body: func(t testing.TB) string { return readTestdata(t, "api_list_messages_response_docs.json") },
			selfApp: docsApp, wantType: "interactive", wantText: "[card]", wantReason: schemas.IneligibleOwnApp,
		},
		{
			name: "get item: text from another app", body: func(t testing.TB) string { return readShared(t, "api_get_message_response_docs.json") },
			selfApp: testSelfAppID, wantType: "text", wantText: "test content", wantReason: schemas.IneligibleNone,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items := decodeHistoryItems(t, tc.body(t))
			in, err := FromHistoryMessage(items[0])
			if err != nil {
				t.Fatal(err)
			}
			want := wantBase
			want.MessageType = tc.wantType
			if !reflect.DeepEqual(in, want) {
				t.Errorf("Input =\n%+v\nwant\n%+v", in, want)
			}
			n, err := New(Options{SelfAppID: tc.selfApp})
			if err != nil {
				t.Fatal(err)
			}
			m := mustNormalize(t, n, in)
			if m.Text != tc.wantText || m.IneligibleReason != tc.wantReason {
				t.Errorf("Text %q reason %q, want %q %q", m.Text, m.IneligibleReason, tc.wantText, tc.wantReason)
			}
			if _, ok := m.Metadata[schemas.MetaChatType]; ok {
				t.Errorf("history has no chat type, metadata has %v", m.Metadata[schemas.MetaChatType])
			}
			checkMeta(t, m.Metadata, map[string]any{
				"upper_message_id": want.UpperMessageID, "sender_app_id": docsApp, "sender_type": "app",
				"thread_id": want.ThreadID, "root_id": want.RootID, "parent_id": want.ParentID,
			})
			if m.SenderOpenID != "" || m.SenderAppID != docsApp {
				t.Errorf("sender open_id %q app %q", m.SenderOpenID, m.SenderAppID)
			}
		})
	}
}

func TestFromHistoryMessageShapes(t *testing.T) {
	tests := []struct {
		name string
		item string
		want func(in Input) bool
	}{
		{"user sender by id_type", `{"sender":{"id":"ou_u1","id_type":"open_id","sender_type":"user"}}`,
			func(in Input) bool {
				return in.SenderID == "ou_u1" && in.SenderAppID == "" && in.SenderType == SenderUser
			}},
		{"user sender without id_type", `{"sender":{"id":"ou_u1","sender_type":"user"}}`,
			func(in Input) bool { return in.SenderID == "ou_u1" && in.SenderType == SenderUser }},
		{"app sender without id_type", `{"sender":{"id":"cli_a1","sender_type":"app"}}`,
			func(in Input) bool {
				return in.SenderAppID == "cli_a1" && in.SenderID == "" && in.SenderType == SenderApp
			}},
		{"anonymous sender", `{"sender":{"sender_type":"anonymous"}}`,
			func(in Input) bool { return in.SenderType == SenderAnonymous }},
		{"unknown sender type", `{"sender":{"id":"ou_u1","id_type":"open_id","sender_type":"robot?"}}`,
			func(in Input) bool { return in.SenderType == SenderUnknown }},
		{"no sender", `{}`,
			func(in Input) bool { return in.SenderType == SenderUnknown && in.SenderID == "" }},
		{"deleted and updated flags", `{"deleted":true,"updated":true}`,
			func(in Input) bool { return in.Deleted && in.Updated }},
		{"mention of non-open_id kind keeps the name only", `{"mentions":[{"key":"@_user_1","id":"cli_x","id_type":"app_id","name":"Bot"}]}`,
			func(in Input) bool {
				return len(in.Mentions) == 1 && in.Mentions[0].OpenID == "" && in.Mentions[0].Name == "Bot"
			}},
		{"16-digit create_time is microseconds", `{"create_time":"1603977298000000"}`,
			func(in Input) bool { return in.CreateTime.Equal(time.UnixMilli(1603977298000)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var item larkim.Message
			if err := json.Unmarshal([]byte(tc.item), &item); err != nil {
				t.Fatal(err)
			}
			in, err := FromHistoryMessage(&item)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(in) {
				t.Errorf("unexpected Input %+v", in)
			}
		})
	}
	if _, err := FromHistoryMessage(nil); !errors.Is(err, ErrMalformedEnvelope) {
		t.Errorf("nil item: err = %v", err)
	}
	bad := "yesterday"
	if _, err := FromHistoryMessage(&larkim.Message{CreateTime: &bad}); !errors.Is(err, ErrInvalidTimestamp) {
		t.Errorf("bad create_time: err = %v", err)
	}
}

// TestEventAndHistoryAgree: the same message read from the event and from history
// normalizes to the same text and hash, although the envelopes differ (chat_type, ids
// shapes, mention shapes).
func TestEventAndHistoryAgree(t *testing.T) {
	n := newTestNormalizer(t)
	content := `{\"text\":\"@_user_1 rollback started\"}`
	event := `{"event":{"sender":{"sender_id":{"open_id":"ou_alice","union_id":"on_x","user_id":""},"sender_type":"user"},
		"message":{"message_id":"om_m1","chat_id":"oc_c1","chat_type":"group","message_type":"text",
		"content":"` + content + `","create_time":"1700000000000",
		"mentions":[{"key":"@_user_1","id":{"open_id":"ou_bob"},"name":"Bob"}]}}}`
	history := `{"message_id":"om_m1","chat_id":"oc_c1","msg_type":"text","create_time":"1700000000000",
		"update_time":"1700000000000","deleted":false,"updated":false,
		"sender":{"id":"ou_alice","id_type":"open_id","sender_type":"user"},
		"body":{"content":"` + content + `"},
		"mentions":[{"key":"@_user_1","id":"ou_bob","id_type":"open_id","name":"Bob"}]}`

	evIn, err := FromReceiveEvent(decodeReceiveEvent(t, event))
	if err != nil {
		t.Fatal(err)
	}
	var item larkim.Message
	if err := json.Unmarshal([]byte(history), &item); err != nil {
		t.Fatal(err)
	}
	hIn, err := FromHistoryMessage(&item)
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustNormalize(t, n, evIn), mustNormalize(t, n, hIn)
	if a.Text != "@Bob rollback started" || a.Text != b.Text {
		t.Errorf("texts %q / %q", a.Text, b.Text)
	}
	if a.ContentHash != b.ContentHash {
		t.Errorf("event hash %s != history hash %s", a.ContentHash, b.ContentHash)
	}
	if !a.CreatedAt.Equal(b.CreatedAt) || a.SenderOpenID != b.SenderOpenID {
		t.Errorf("created %v/%v sender %q/%q", a.CreatedAt, b.CreatedAt, a.SenderOpenID, b.SenderOpenID)
	}
}
