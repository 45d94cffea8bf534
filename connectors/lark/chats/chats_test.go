package chats_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

type fakeSource struct {
	mu    sync.Mutex
	modes map[ids.ChatID]string
	err   error
	calls int
}

func (f *fakeSource) GetChat(_ context.Context, chat ids.ChatID) (larkapi.ChatInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return larkapi.ChatInfo{}, f.err
	}
	return larkapi.ChatInfo{Mode: f.modes[chat]}, nil
}

func TestGuardRefusesNonGroupChatsAndCaches(t *testing.T) {
	src := &fakeSource{modes: map[ids.ChatID]string{"oc_group": "group", "oc_topic": "topic", "oc_p2p": "p2p", "oc_odd": "meeting"}}
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	g, err := chats.New(chats.Options{Source: src, TTL: time.Hour, Clock: func() time.Time { return now }, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []ids.ChatID{"oc_group", "oc_topic"} {
		if err := g.Check(ctx, c, chats.PathReconcile); err != nil {
			t.Errorf("%s: %v, want nil", c, err)
		}
	}
	err = g.Check(ctx, "oc_p2p", chats.PathReconcile)
	if !errors.Is(err, chats.ErrP2PChat) || !errors.Is(err, chats.ErrRefused) || chats.Reason(err) != chats.ReasonP2PChat {
		t.Errorf("p2p: %v, want ErrP2PChat", err)
	}
	err = g.Check(ctx, "oc_odd", chats.PathAdmin)
	if !errors.Is(err, chats.ErrUnsupportedChat) || errors.Is(err, chats.ErrP2PChat) {
		t.Errorf("meeting: %v, want ErrUnsupportedChat", err)
	}
	if err := g.Check(ctx, "oc_p2p", chats.PathFeed); !errors.Is(err, chats.ErrP2PChat) {
		t.Errorf("p2p again: %v", err)
	}
	if src.calls != 4 {
		t.Errorf("%d lookups for 4 chats checked 5 times, want 4 (cached)", src.calls)
	}
	refused := func(path, reason string) float64 {
		v, _ := testenv.MetricValue(t, reg, "larkline_lark_chat_refusals_total", map[string]string{"path": path, "reason": reason})
		return v
	}
	if got := refused("reconcile", "p2p_chat"); got != 1 {
		t.Errorf("refusals{reconcile,p2p_chat} = %v, want 1", got)
	}
	if got := refused("feed", "p2p_chat"); got != 1 {
		t.Errorf("refusals{feed,p2p_chat} = %v, want 1", got)
	}
	if got := refused("admin", "unsupported_chat_type"); got != 1 {
		t.Errorf("refusals{admin,unsupported_chat_type} = %v, want 1", got)
	}

	// past the TTL the chat is looked up again
	now = now.Add(time.Hour)
	src.modes["oc_group"] = "p2p"
	if err := g.Check(ctx, "oc_group", chats.PathReconcile); !errors.Is(err, chats.ErrP2PChat) {
		t.Errorf("after the TTL: %v, want the new answer", err)
	}
	// a failure is returned, not cached and not a refusal
	src.err = &larkapi.APIError{Op: "im chat get", Status: 500, Code: 500, Msg: "boom"}
	err = g.Check(ctx, "oc_new", chats.PathAdmin)
	if err == nil || errors.Is(err, chats.ErrRefused) {
		t.Errorf("lookup failure: %v, want an error that is not a refusal", err)
	}
	src.err = nil
	src.modes["oc_new"] = "group"
	if err := g.Check(ctx, "oc_new", chats.PathAdmin); err != nil {
		t.Errorf("after the failure: %v (failures must not be cached)", err)
	}
	if err := g.Check(ctx, "not-a-chat", chats.PathAdmin); !errors.Is(err, ids.ErrInvalidID) {
		t.Errorf("invalid id: %v", err)
	}
}

func TestGuardBoundsItsCache(t *testing.T) {
	src := &fakeSource{modes: map[ids.ChatID]string{}}
	g, err := chats.New(chats.Options{Source: src, MaxEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []ids.ChatID{"oc_a", "oc_b", "oc_c", "oc_c", "oc_b"} {
		src.modes[c] = "group"
		if err := g.Check(context.Background(), c, chats.PathReconcile); err != nil {
			t.Fatal(err)
		}
	}
	if src.calls != 3 {
		t.Errorf("%d lookups, want 3 (oc_c and oc_b cached, oc_a evicted)", src.calls)
	}
}

func TestNewValidates(t *testing.T) {
	for _, o := range []chats.Options{{}, {Source: &fakeSource{}, TTL: -1}, {Source: &fakeSource{}, MaxEntries: -1}, {Source: &fakeSource{}, Timeout: -1}} {
		if _, err := chats.New(o); !errors.Is(err, chats.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}

// TestLarkSourceAgainstLarktest: larkapi.Client.GetChat reads chat_mode from larktest.
func TestLarkSourceAgainstLarktest(t *testing.T) {
	app := larktest.NewAppID() // the SDK's token cache outlives the server, also under -count
	sc, err := larktest.NewScenario(larktest.App{AppID: app, BotOpenID: "ou_bot"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	if err := sc.AddWorkspace(larktest.Workspace{ID: "ws-1", Type: "incident", Status: "firing", CreatedAt: at.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	b := larktest.Builder{AppID: app}
	for _, m := range []larktest.Msg{
		{ID: "om_g1", Chat: "oc_group", ChatType: "group", From: larktest.Author{OpenID: "ou_a"}, At: at},
		{ID: "om_p1", Chat: "oc_p2p", ChatType: "p2p", From: larktest.Author{OpenID: "ou_a"}, At: at},
	} {
		if err := sc.AddEvent(larktest.DeliverOnce, b.Text(m, "x")); err != nil {
			t.Fatal(err)
		}
	}
	srv := larktest.StartForTest(t, larktest.Options{AppSecret: "s3cret", Scenario: sc, Now: func() time.Time { return at.Add(time.Hour) }})
	src, err := larkapi.New(lark.NewClient(srv.AppID(), "s3cret", lark.WithOpenBaseUrl(srv.URL()), lark.WithLogLevel(larkcore.LogLevelError)))
	if err != nil {
		t.Fatal(err)
	}
	for chat, want := range map[ids.ChatID]string{"oc_group": larkapi.ModeGroup, "oc_p2p": larkapi.ModeP2P} {
		info, err := src.GetChat(context.Background(), chat)
		if err != nil || info.Mode != want {
			t.Errorf("%s: %+v, %v; want mode %q", chat, info, err, want)
		}
	}
	_, err = src.GetChat(context.Background(), "oc_stranger")
	var ae *larkapi.APIError
	if !errors.As(err, &ae) || ae.Code != larktest.CodeBotNotInChat {
		t.Errorf("stranger: %v, want code %d", err, larktest.CodeBotNotInChat)
	}
	if larkapi.IsRetryable(err) {
		t.Errorf("bot not in chat is not retryable")
	}
}
