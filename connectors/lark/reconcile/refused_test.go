package reconcile

import (
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

// TestRefusedThreadReadOnALaterRun (issue #19): Lark refuses the thread container of a
// thread whose reply lies in the backfill's range; the checkpoint moves past the range
// but keeps the thread, and the next incremental run, in a new process, after the
// retry is due, reads the thread from where the refusal left it and collects the reply.
// A run after that has nothing left to retry.
func TestRefusedThreadReadOnALaterRun(t *testing.T) {
	const (
		ws     = ids.WorkspaceID("ws-refused")
		chat   = ids.ChatID("oc_refused")
		thread = "omt_refused"
	)
	e := newEnv(t, chat)
	now := time.Now()
	e.workspace(t, ws, "incident", store.WorkspaceFiring, now.Add(-2*time.Hour), chat)
	root := msgID("rf", 0)
	reply := msgID("rf", 1)
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: root, Chat: chat, At: now.Add(-90 * time.Minute)}, "root")
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: reply, Chat: chat, At: now.Add(-80 * time.Minute), RootID: root, ParentID: root, ThreadID: thread}, "reply")
	e.lark.refuseThread(thread, 1)
	ctx := ctxTimeout(t)

	opts := e.options(t)
	if c := runOne(t, ctx, e.reconciler(t, opts)); c.Err != nil || !c.Complete || c.Kind != KindBackfill {
		t.Fatalf("backfill: %+v", c)
	}
	if _, ok := byMessage(e.evidence(t))[reply]; ok {
		t.Fatal("the reply was collected although Lark refused its thread")
	}
	cp, ok := e.checkpoint(t, ws, chat)
	if !ok || len(cp.Meta.RefusedThreads) != 1 || cp.Meta.RefusedThreads[0].ID != thread || cp.Meta.RefusedThreads[0].Attempts != 1 {
		t.Fatalf("checkpoint after the refusal: %+v", cp)
	}
	if from := cp.Meta.RefusedThreads[0].From; from.After(now.Add(-80 * time.Minute)) {
		t.Fatalf("refused thread unread from %v, after the reply", from)
	}
	if got, _ := testenv.MetricValue(t, e.registry, "larkline_reconcile_refused_threads_total", map[string]string{"result": threadRefused}); got != 1 {
		t.Fatalf("refused threads counted %v, want 1", got)
	}
	e.sinkAll(t)

	// A later pass, in a new process, once the retry is due.
	later := func() time.Time { return time.Now().Add(DefaultReconcileInterval + time.Minute) }
	opts = e.options(t)
	opts.Clock = later
	before := len(e.lark.calls())
	if c := runOne(t, ctx, e.reconciler(t, opts)); c.Err != nil || !c.Complete || c.Kind != KindIncremental {
		t.Fatalf("later run: %+v", c)
	}
	if _, ok := byMessage(e.evidence(t))[reply]; !ok {
		t.Fatal("the reply of the refused thread was not collected by a later run")
	}
	if _, threadQ := chatCalls(e.lark.calls()[before:]); len(threadQ) != 1 || threadQ[0].id != thread {
		t.Fatalf("thread requests of the later run: %+v", threadQ)
	}
	if cp, _ := e.checkpoint(t, ws, chat); len(cp.Meta.RefusedThreads) != 0 {
		t.Fatalf("checkpoint still lists refused threads: %+v", cp.Meta.RefusedThreads)
	}
	if got, _ := testenv.MetricValue(t, e.registry, "larkline_reconcile_refused_threads_total", map[string]string{"result": threadRecovered}); got != 1 {
		t.Fatalf("recovered threads counted %v, want 1", got)
	}
}
