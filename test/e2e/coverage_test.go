package e2e

import (
	"testing"
	"time"

	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/schemas"
)

// TestWindowDraftFollowsItsGrace (issue #20): with one-minute windows and a
// reconciliation interval of ten minutes, a window with a live message gets its
// draft entry from the coverage pass that follows the window's end, not from the next
// interval pass: when the draft exists the reconciler has made only its first interval
// pass, a coverage pass covered the chat's window, and the window closed covered.
// The figure (how many seconds) belongs to BenchmarkLoadSustained1000Chats.
func TestWindowDraftFollowsItsGrace(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Minute
	sc := loadScenario(t, 1, 0, time.Now(), time.Minute)
	p := newPipeline(t, pipelineOptions{Scenario: sc, Live: true, Window: time.Minute, Env: []string{
		"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__RECONCILEINTERVAL=" + interval.String(),
	}})
	ctx := p.ctx
	rec := p.procs[procReconcile]
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		v, err := rec.metric(ctx, name, labels...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	// The first interval pass is done before the message exists.
	deadline := time.Now().Add(2 * time.Minute)
	for metric("larkline_reconcile_passes_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no first reconciliation pass: %s", rec.logTail(20))
		}
		<-tick.C
	}

	env := loadMessage(0, 0, p.sc.Users()[0].OpenID, time.Now())
	body, err := env.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.lark.AddEvent(larktest.DeliverOnce, env); err != nil { // history shows it too
		t.Fatal(err)
	}
	if err := p.sc.AddEvent(larktest.DeliverOnce, env); err != nil {
		t.Fatal(err)
	}
	if r := p.pushOne(ctx, p.sender(longRetries), p.stamped(body, "live-0"), 10); r.err != nil {
		t.Fatal(r.err)
	}

	// Wait for the draft: the window ends within a minute; the bound only keeps a
	// broken test from waiting for the next interval pass.
	deadline = time.Now().Add(4 * time.Minute)
	for {
		g, err := p.progress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g.entries > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no draft entry (%s); reconcile: %s", g, rec.logTail(30))
		}
		<-tick.C
	}
	if n := metric("larkline_reconcile_passes_total"); n != 1 {
		t.Fatalf("%v interval passes when the draft existed: the draft waited for the interval, not the window clock", n)
	}
	if n := metric("larkline_reconcile_coverage_passes_total"); n < 1 {
		t.Fatal("no coverage pass")
	}
	if n := metric("larkline_reconcile_window_coverage_seconds_count"); n < 1 {
		t.Fatal("no coverage run reached the window's end")
	}
	closed := p.closedWindows(ctx)
	if len(closed) != 1 || closed[0].Reason != schemas.CloseReasonGraceElapsedHistoryCovered {
		t.Fatalf("closed windows %+v, want one closed with history covering it", closed)
	}
	v, err := p.procs[procSynth].metric(ctx, "larkline_synthesis_window_end_to_first_draft_seconds_count")
	if err != nil || v != 1 {
		t.Fatalf("larkline_synthesis_window_end_to_first_draft_seconds_count = %v (%v), want 1", v, err)
	}
	if err := p.checkInvariants(ctx); err != nil {
		t.Fatal(err)
	}
}
