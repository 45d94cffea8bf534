package larktest_test

import (
	"context"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas/ids"
)

// TestSDKGetsChatModes: the chat info API answers each chat's real mode, read by
// the official SDK (client.Im.Chat.Get): the group of the fixture, a single chat
// and a topic group whose events say so, a bound chat without messages (a group),
// and 230002 for a chat the bot is not in.
func TestSDKGetsChatModes(t *testing.T) {
	sc := fixture(t)
	b := larktest.Builder{AppID: "cli_fixture0000000", TenantKey: fxTenant, Token: "file-token"}
	const p2p, topic, empty = ids.ChatID("oc_private"), ids.ChatID("oc_topics"), ids.ChatID("oc_quiet")
	must(t, sc.AddBinding(fxWS, p2p))
	must(t, sc.AddBinding(fxWS, empty))
	must(t, sc.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: "om_p2p1", Chat: p2p, ChatType: "p2p",
		From: larktest.Author{OpenID: fxAlice}, At: fxBase.Add(2 * time.Minute)}, "a note")))
	must(t, sc.AddEvent(larktest.DeliverOnce, b.Text(larktest.Msg{ID: "om_top1", Chat: topic, ChatType: "topic_group",
		From: larktest.Author{OpenID: fxAlice}, At: fxBase.Add(3 * time.Minute)}, "a topic")))
	srv := newServer(t, sc, nil)
	cli := sdkClient(srv, fxSecret)

	for _, tc := range []struct {
		chat     ids.ChatID
		mode     string
		chatType string
	}{
		{fxChat, larktest.ChatModeGroup, "private"},
		{p2p, larktest.ChatModeP2P, ""},
		{topic, larktest.ChatModeTopic, "private"},
		{empty, larktest.ChatModeGroup, "private"},
	} {
		resp, err := cli.Im.Chat.Get(context.Background(), larkim.NewGetChatReqBuilder().ChatId(string(tc.chat)).Build())
		if err != nil {
			t.Fatalf("%s: %v", tc.chat, err)
		}
		if !resp.Success() {
			t.Fatalf("%s: code %d %s", tc.chat, resp.Code, resp.Msg)
		}
		if got := deref(resp.Data.ChatMode); got != tc.mode {
			t.Errorf("%s: chat_mode %q, want %q", tc.chat, got, tc.mode)
		}
		if got := deref(resp.Data.ChatType); got != tc.chatType {
			t.Errorf("%s: chat_type %q, want %q (Lark sends none for a single chat)", tc.chat, got, tc.chatType)
		}
	}
	resp, err := cli.Im.Chat.Get(context.Background(), larkim.NewGetChatReqBuilder().ChatId("oc_stranger").Build())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != larktest.CodeBotNotInChat {
		t.Errorf("chat the bot is not in: code %d, want %d", resp.Code, larktest.CodeBotNotInChat)
	}
	if n := srv.Calls(larktest.PathGetChat); n != 5 {
		t.Errorf("Calls(PathGetChat) = %d, want 5", n)
	}
	if err := srv.FailNext(larktest.PathGetChat, 1, larktest.FaultHTTP500()); err != nil {
		t.Errorf("FailNext(PathGetChat): %v", err)
	}
}
