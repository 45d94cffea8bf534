package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// windowAttempt is what a window state says of its attempts.
type windowAttempt struct {
	status                     string
	attempts, refunded, chunks int
}

func (w windowAttempt) String() string {
	return fmt.Sprintf("%s attempts=%d refunded=%d chunks=%d", w.status, w.attempts, w.refunded, w.chunks)
}

// windowAttempts lists every window state's status, counted and refunded attempts
// and chunks, by source key.
func (p *pipeline) windowAttempts(ctx context.Context) (map[string]windowAttempt, error) {
	rows, err := p.pool.Query(ctx, `SELECT source_key, status, attempts,
			coalesce((metadata_json->>'refunded_attempts')::int, 0), coalesce((metadata_json->>'chunk_count')::int, 0)
		FROM workspace_timeline_sync_states WHERE source = $1 AND source_type = $2`, ids.SourceSystem, ids.SourceTypeLarkWindow)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]windowAttempt{}
	for rows.Next() {
		var (
			key string
			w   windowAttempt
		)
		if err := rows.Scan(&key, &w.status, &w.attempts, &w.refunded, &w.chunks); err != nil {
			return nil, err
		}
		out[key] = w
	}
	return out, rows.Err()
}

// TestSinkStoppedSynthesisWaitsWithoutSpendingAttempts holds the evidence sink's
// process down from the start (the workspaces feed runs in the edge process here):
// the window processor closes the windows,
// and synthesis waits for the sink's committed offset (its waits counted) without
// claiming any window. Once the sink runs again every window completes at its first
// attempt, with none refunded or failed.
func TestSinkStoppedSynthesisWaitsWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, pipelineOptions{
		Layout: []procSpec{
			{procSink, []string{"sink"}},
			{procWindows, []string{"windows"}},
			{procSynth, []string{"synthesis"}},
			{procReconcile, []string{"reconcile"}},
			{procEdge, []string{"workspaces", "ingest", "api"}},
		},
		Hold: []string{procSink},
		Env:  []string{"LARKLINE_SYNTHESIS__EVIDENCEWAIT=2s"},
	})
	ctx := p.ctx
	p.deliver(ctx)
	synth := p.procs[procSynth]
	waits := func() float64 {
		v, _ := synth.metric(ctx, "larkline_synthesis_sink_wait_timeouts_total")
		return v
	}
	if err := waitFor(ctx, 3*time.Minute, func() bool { return waits() >= 2 }, func() string {
		return fmt.Sprintf("synthesis counted %v sink waits, want 2", waits())
	}); err != nil {
		t.Fatal(err)
	}
	states, err := p.windowAttempts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 0 || p.evidenceCount(ctx) != 0 {
		t.Fatalf("with the sink stopped: %d evidence rows and window states %v; want none (nothing claimed)", p.evidenceCount(ctx), states)
	}

	p.procs[procSink].Start()
	p.waitReady(procSink)
	g := p.waitDone(ctx, 5*time.Minute)
	if err := p.checkInvariants(ctx); err != nil {
		t.Fatal(err)
	}
	p.procs[procSink].Stop() // its whole log, one batch and its stop, for the scan
	p.assertLogsClean(t)
	if states, err = p.windowAttempts(ctx); err != nil {
		t.Fatal(err)
	}
	if len(states) == 0 || len(states) < g.windows {
		t.Fatalf("%d window states for %d windows", len(states), g.windows)
	}
	for key, s := range states {
		if s.attempts != 1 || s.refunded != 0 || (s.status != "completed" && s.status != "ignored") {
			t.Errorf("window %s: %s; want completed or ignored at its first attempt, none refunded", key, s)
		}
	}
	if f, err := synth.metric(ctx, "larkline_synthesis_attempt_failures_total"); err != nil || f != 0 {
		t.Errorf("attempt failures = %v (%v), want 0: waiting for the sink is not an attempt", f, err)
	}
}

// TestSynthesisKilledMidWindowResumesAtNextChunk kills the synthesis process (SIGKILL)
// while it is in the middle of a window of 200 messages in 20 chunks. The supervisor
// restarts it; the window's claim goes stale (no heartbeat from the dead process) and
// the new process takes it over at attempt 2, resuming after the last committed chunk:
// the model answers every chunk once, and at most the chunk in flight at the kill
// twice.
func TestSynthesisKilledMidWindowResumesAtNextChunk(t *testing.T) {
	t.Parallel()
	const messages, perChunk = 200, 10
	model := newFakeModel(t)
	model.setDelay(200 * time.Millisecond)
	start := time.Date(2026, 1, 5, 10, 0, 30, 0, time.UTC) // one 10-minute window
	p := newPipeline(t, pipelineOptions{
		Scenario: loadScenario(t, 1, messages, start, 8*time.Minute),
		ModelURL: model.url(),
		Env: []string{
			"LARKLINE_SYNTHESIS__OPENAI__TIMEOUT=2s", "LARKLINE_SYNTHESIS__OPENAI__MAXRETRIES=0",
			fmt.Sprintf("LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__EVIDENCEBATCHLIMIT=%d", perChunk),
			// the dead process's claim is taken over 6 s after its last heartbeat
			"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISSTALETIMEOUT=6s",
		},
	})
	ctx := p.ctx
	done := p.deliverAsync(ctx)
	chunks := func() int { return len(model.chunkCalls()) }
	if err := waitFor(ctx, 3*time.Minute, func() bool { return chunks() >= 5 }, func() string {
		return fmt.Sprintf("%d chunks answered, want 5", chunks())
	}); err != nil {
		t.Fatal(err)
	}
	if err := model.waitInFlight(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	before := chunks()
	t.Logf("killing synthesis with a chunk in flight (%d chunks answered)", before)
	p.procs[procSynth].Crash()
	p.expectDelivered(<-done)
	p.finish(6 * time.Minute)
	if p.procs[procSynth].Restarts() < 1 {
		t.Fatal("synthesis was never restarted")
	}

	states, err := p.windowAttempts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := windowAttempt{status: "completed", attempts: 2, chunks: messages / perChunk}
	if len(states) != 1 {
		t.Fatalf("window states %v, want one window", states)
	}
	for key, s := range states {
		if s != want {
			t.Fatalf("window %s: %s, want %s (taken over once, every chunk committed once)", key, s, want)
		}
	}
	calls := model.chunkCalls()
	twice := 0
	for first, n := range calls {
		switch {
		case n == 2:
			twice++
		case n != 1:
			t.Errorf("chunk from evidence %d answered %d times", first, n)
		}
	}
	if len(calls) != messages/perChunk || twice > 1 {
		t.Fatalf("%d chunks answered, %d of them twice (%v); want %d chunks, at most the one in flight at the kill twice",
			len(calls), twice, calls, messages/perChunk)
	}
	if n, err := p.procs[procSynth].metric(ctx, "larkline_synthesis_claims_total", `outcome="taken_over"`); err != nil || n < 1 {
		t.Errorf("takeovers by the restarted process = %v (%v), want 1", n, err)
	}
}
