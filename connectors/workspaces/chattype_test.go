package workspaces

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	larkchats "github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// modes is a chat info API: chat → chat_mode; a chat it does not know fails as
// Lark's HTTP 500 would.
type modes struct {
	mu sync.Mutex
	m  map[ids.ChatID]string
}

func (s *modes) GetChat(_ context.Context, chat ids.ChatID) (larkapi.ChatInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mode, ok := s.m[chat]
	if !ok {
		return larkapi.ChatInfo{}, &larkapi.APIError{Op: "im chat get", Status: http.StatusInternalServerError, Code: 500, Msg: "down"}
	}
	return larkapi.ChatInfo{Mode: mode}, nil
}

func newGuard(t *testing.T, reg *prometheus.Registry) *larkchats.Guard {
	t.Helper()
	g, err := larkchats.New(larkchats.Options{Source: &modes{m: map[ids.ChatID]string{
		"oc_group": "group", "oc_topic": "topic", "oc_note": "p2p", "oc_odd": "meeting",
	}}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func refusals(t *testing.T, reg *prometheus.Registry, path, reason string) float64 {
	t.Helper()
	v, _ := testenv.MetricValue(t, reg, "larkline_lark_chat_refusals_total", map[string]string{"path": path, "reason": reason})
	return v
}

// TestAdminRefusesToBindNonGroupChats (issue #17): Bind and the admin API refuse a
// single (p2p) chat and an unsupported one with a clear error and bind nothing;
// when Lark cannot say, nothing is bound either (503, retryable).
func TestAdminRefusesToBindNonGroupChats(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	reg := prometheus.NewRegistry()
	a, err := NewAdmin(st, AdminOptions{Now: fixedNow, Chats: newGuard(t, reg)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := a.PutWorkspace(ctx, spec("INC-1", store.WorkspaceFiring)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []ids.ChatID{"oc_group", "oc_topic"} {
		if added, err := a.Bind(ctx, "INC-1", c); err != nil || !added {
			t.Fatalf("Bind(%s) = %t, %v; want bound", c, added, err)
		}
	}
	_, err = a.Bind(ctx, "INC-1", "oc_note")
	var fe *FieldError
	if !errors.Is(err, ErrNotGroupChat) || !errors.Is(err, ErrInvalid) || !errors.Is(err, larkchats.ErrP2PChat) ||
		!errors.As(err, &fe) || fe.Field != "chat_id" {
		t.Fatalf("Bind(p2p) = %v, want a chat_id FieldError wrapping ErrNotGroupChat", err)
	}
	if got := err.Error(); got != "invalid chat_id: chat oc_note is a single (p2p) chat; only group chats can be bound" {
		t.Errorf("message %q", got)
	}
	if _, err := a.Bind(ctx, "INC-1", "oc_odd"); !errors.Is(err, ErrNotGroupChat) || !errors.Is(err, larkchats.ErrUnsupportedChat) {
		t.Errorf("Bind(unsupported) = %v, want ErrNotGroupChat", err)
	}
	_, err = a.Bind(ctx, "INC-1", "oc_unknown")
	if !errors.Is(err, ErrChatCheckUnavailable) || errors.Is(err, ErrInvalid) || !IsRetryable(err) {
		t.Errorf("Bind with Lark down = %v, want retryable ErrChatCheckUnavailable", err)
	}
	d, err := a.GetWorkspace(ctx, "INC-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Chats) != 2 {
		t.Errorf("bound chats %v, want only the group and the topic group", d.Chats)
	}
	if v := refusals(t, reg, "admin", "p2p_chat"); v != 1 {
		t.Errorf("refusals{admin,p2p_chat} = %v, want 1", v)
	}

	h, err := NewHandler(a, HandlerOptions{AdminTokenSHA256: tokenDigest(adminToken)})
	if err != nil {
		t.Fatal(err)
	}
	api := apiClient{t: t, h: h, token: adminToken}
	r := api.do(http.MethodPut, "/api/v1/admin/workspaces/INC-1/chats/oc_note", "")
	if r.code != http.StatusBadRequest || r.errorCode(t) != CodeNotGroupChat {
		t.Errorf("PUT p2p binding: %d %s, want 400 %s", r.code, r.body, CodeNotGroupChat)
	}
	r = api.do(http.MethodPut, "/api/v1/admin/workspaces/INC-1/chats/oc_unknown", "")
	if r.code != http.StatusServiceUnavailable || r.errorCode(t) != CodeChatCheckUnavailable {
		t.Errorf("PUT with Lark down: %d %s, want 503 %s", r.code, r.body, CodeChatCheckUnavailable)
	}
	if v := refusals(t, reg, "admin", "p2p_chat"); v != 2 {
		t.Errorf("refusals{admin,p2p_chat} = %v, want 2", v)
	}
}

// TestFeedIgnoresNonGroupChats (issue #17): a feed record binding a group chat and
// a p2p chat applies, without the p2p chat (reported and counted); a chat Lark
// cannot answer for is kept (reconciliation checks it before reading).
func TestFeedIgnoresNonGroupChats(t *testing.T) {
	t.Parallel()
	e := newFeedEnv(t, 1)
	st := newStore(t)
	reg := prometheus.NewRegistry()
	o := e.consumerOptions("g", applier(t, st), nil)
	o.Chats = newGuard(t, reg)
	c, err := NewConsumer(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; c.Close() })

	e.record(rec("INC-P", 1, "firing", "oc_group", "oc_note", "oc_unknown"))
	testenv.WaitCommitted(t, waitLimit, "g", e.topic)
	w, err := st.GetWorkspace(context.Background(), "INC-P")
	if err != nil || w.Status != store.WorkspaceFiring {
		t.Fatalf("workspace %+v, %v: the record must apply", w, err)
	}
	got, err := st.ChatsOfWorkspace(context.Background(), "INC-P")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "oc_group" || got[1] != "oc_unknown" {
		t.Errorf("bound chats %v, want oc_group and oc_unknown (the p2p chat ignored)", got)
	}
	if v := refusals(t, reg, "feed", "p2p_chat"); v != 1 {
		t.Errorf("refusals{feed,p2p_chat} = %v, want 1", v)
	}
}
