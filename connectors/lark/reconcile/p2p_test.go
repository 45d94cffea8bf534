package reconcile

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// TestP2PChatNeverBecomesEvidence (issue #17): a workspace bound to a group chat
// and to a single (p2p) chat. The webhook path refuses the p2p chat's events (their
// chat_type says so); reconciliation learns the chat's mode from the chat info API
// and reads no page of it, automatically or in a manual refresh, while the group
// chat's dropped events are still recovered. The refusal is counted.
func TestP2PChatNeverBecomesEvidence(t *testing.T) {
	const (
		ws      = ids.WorkspaceID("ws-p2p")
		group   = ids.ChatID("oc_p2pgroup")
		private = ids.ChatID("oc_p2pnote")
	)
	e := newEnv(t, group, private)
	created := time.Now().Add(-time.Hour)
	e.workspace(t, ws, "incident", store.WorkspaceFiring, created, group, private)
	for i := range 4 {
		at := created.Add(time.Duration(i+1) * 5 * time.Minute)
		d := larktest.DeliverOnce
		if i == 1 {
			d = larktest.DeliverDrop
		}
		e.lark.say(t, d, larktest.Msg{ID: msgID("p2pg", i), Chat: group, At: at}, "group update")
		pd := larktest.DeliverOnce
		if i%2 == 1 {
			pd = larktest.DeliverDrop // only in history: reconciliation is the only way in
		}
		e.lark.say(t, pd, larktest.Msg{ID: msgID("p2pn", i), Chat: private, ChatType: "p2p", At: at.Add(time.Minute)}, "private note")
	}

	ctx := ctxTimeout(t)
	e.deliverWebhook(t, ctx)
	e.sinkAll(t)

	// reconciliation
	r := e.reconciler(t, e.options(t))
	rep, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Chats {
		switch c.Chat {
		case group:
			if c.Err != nil || !c.Complete || c.Produced != 1 {
				t.Errorf("group chat run %+v, want complete with the dropped message produced", c)
			}
		case private:
			if !errors.Is(c.Stopped, ErrNotGroupChat) || !errors.Is(c.Stopped, chats.ErrP2PChat) || c.Pages != 0 || c.Err != nil {
				t.Errorf("p2p chat run %+v, want stopped with ErrNotGroupChat before any page", c)
			}
		}
	}
	if lp, ok := r.LastPass(); !ok || !lp.Started.Equal(rep.Started) || testutil.ToFloat64(r.m.passes) != 1 {
		t.Errorf("LastPass() = %v, %v; passes_total %v: want the pass just done", lp.Started, ok, testutil.ToFloat64(r.m.passes))
	}
	e.sinkAll(t)
	if _, err := r.Refresh(ctx, ws); !errors.Is(err, ErrNotGroupChat) || !errors.Is(err, chats.ErrP2PChat) {
		t.Errorf("manual refresh: %v, want the p2p chat refused", err)
	}

	for _, c := range e.lark.calls() {
		if c.id == string(private) {
			t.Errorf("history of the p2p chat was read: %+v", c)
		}
	}
	got := byMessage(e.evidence(t))
	for i := range 4 {
		if n := len(got[msgID("p2pn", i)]); n != 0 {
			t.Errorf("p2p message %d: %d evidence records, want none", i, n)
		}
		if n := len(got[msgID("p2pg", i)]); n != 1 {
			t.Errorf("group message %d: %d evidence records, want 1", i, n)
		}
	}
	if _, ok := e.checkpoint(t, ws, private); ok {
		t.Error("the p2p chat has a collection checkpoint: it was reconciled")
	}
	if n := e.lark.srv.Calls(larktest.PathGetChat); n != 2 {
		t.Errorf("%d chat info calls, want 2 (one per chat, then cached)", n)
	}
	refusals, _ := testenv.MetricValue(t, e.registry, "larkline_lark_chat_refusals_total", map[string]string{"path": "reconcile", "reason": "p2p_chat"})
	if refusals != 2 {
		t.Errorf("larkline_lark_chat_refusals_total{path=reconcile,reason=p2p_chat} = %v, want 2 (the pass and the refresh)", refusals)
	}
	for _, k := range []Kind{KindIncremental, KindManual} {
		if v := testutil.ToFloat64(r.m.runs.WithLabelValues(string(k), "refused")); v != 1 {
			t.Errorf("runs{%s,refused} = %v, want 1", k, v)
		}
	}
}

// TestChatLookupFailureReadsNothing: when Lark cannot say what a chat is, the run
// fails closed (no page read), is counted, and the next pass tries again.
func TestChatLookupFailureReadsNothing(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-lookup")
		chat = ids.ChatID("oc_lookup")
	)
	e, created := newIncident(t, ws, chat, time.Hour)
	e.lark.say(t, larktest.DeliverDrop, larktest.Msg{ID: msgID("look", 0), Chat: chat, At: created.Add(time.Minute)}, "x")
	if err := e.lark.srv.FailNext(larktest.PathGetChat, 1, larktest.FaultCode(larktest.CodeBotNotInChat)); err != nil {
		t.Fatal(err)
	}
	r := e.reconciler(t, e.options(t))
	ctx := ctxTimeout(t)
	if c := runOne(t, ctx, r); c.Err == nil || failureReason(c.Err) != reasonChatLookup || c.Pages != 0 {
		t.Fatalf("run %+v, want a chat_lookup failure before any page", c)
	}
	if n := len(e.lark.calls()); n != 0 {
		t.Fatalf("%d history calls after a failed chat lookup, want 0", n)
	}
	if v := testutil.ToFloat64(r.m.failures.WithLabelValues(reasonChatLookup)); v != 1 {
		t.Errorf("failures{chat_lookup} = %v, want 1", v)
	}
	if c := runOne(t, ctx, r); c.Err != nil || !c.Complete || c.Produced != 1 {
		t.Fatalf("second run %+v, want complete (the failure was not cached)", c)
	}
}
