package synthesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// flakyModel is a synthesizer whose endpoint is down (ErrUnavailable) while down is
// set; it counts the calls made while down, then answers with fail's error, if any,
// or delegates to next.
type flakyModel struct {
	next synth.Synthesizer
	fail error // the answer once up; nil delegates

	mu        sync.Mutex
	down      bool
	downCalls int
	upCalls   int
}

func (f *flakyModel) Synthesize(ctx context.Context, req synth.Request) (synth.Result, error) {
	f.mu.Lock()
	down := f.down
	if down {
		f.downCalls++
	} else {
		f.upCalls++
	}
	f.mu.Unlock()
	switch {
	case down:
		return synth.Result{Synthesizer: "flaky"}, fmt.Errorf("fake endpoint: HTTP 503: %w", synth.ErrUnavailable)
	case f.fail != nil:
		return synth.Result{Synthesizer: "flaky"}, f.fail
	}
	return f.next.Synthesize(ctx, req)
}

func (f *flakyModel) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakyModel) calls() (down, up int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.downCalls, f.upCalls
}

// outageWindows seeds n windows, each in its own workspace and chat (so they may run
// concurrently), and returns their keys and closed-window records.
func (e *env) outageWindows(n int) ([]store.WindowKey, []schemas.ClosedWindow) {
	e.t.Helper()
	var (
		keys []store.WindowKey
		cws  []schemas.ClosedWindow
	)
	for i := range n {
		e.ws, e.chat = ids.WorkspaceID(fmt.Sprintf("ws-outage-%d", i)), ids.ChatID(fmt.Sprintf("oc_outage_%d", i))
		rows := e.seed(win, incidentLines...)
		keys = append(keys, e.key(win))
		cws = append(cws, e.closedWindow(win, rows))
	}
	return keys, cws
}

func (e *env) windowStates(keys []store.WindowKey) []store.WindowState {
	e.t.Helper()
	out := make([]store.WindowState, len(keys))
	for i, k := range keys {
		st, err := e.st.GetWindow(context.Background(), k)
		if err == nil {
			out[i] = st
			continue
		}
		if !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal(err)
		}
	}
	return out
}

// TestModelOutageDoesNotSpendAttempts: the model is down for far longer than
// MaxAttempts whole-window retries would last. No window fails for good, nothing is
// committed (lag is the signal), the calls made during the outage are bounded by the
// first wave of attempts plus one probe per gate opening, and once the model answers
// every window completes at attempt 1 and every record is committed.
func TestModelOutageDoesNotSpendAttempts(t *testing.T) {
	e := newEnv(t)
	const windows = 5
	keys, cws := e.outageWindows(windows)
	o := e.options()
	o.MaxAttempts, o.ChunkRetries = 2, new(1)
	o.MaxConcurrentSynthesis = 3
	o.ModelOutageBackoffMax = 200 * time.Millisecond
	model := &flakyModel{next: o.Synthesizer, down: true}
	o.Synthesizer = model
	r := e.start(o)
	offs := e.produce(cws...)

	// The outage outlasts what the attempt bound used to allow many times over: the
	// gate opens again and again (each opening follows a failed probe or the first
	// wave), while every window waits without spending attempts.
	const opens = 8
	eventually(t, "the model gate to open repeatedly", func() bool {
		return r.counter("larkline_synthesis_model_gate_opens_total") >= opens
	})
	if got := r.counter("larkline_synthesis_model_available"); got != 0 {
		t.Errorf("model_available = %v during the outage, want 0", got)
	}
	eventually(t, "windows waiting for the gate", func() bool {
		return r.counter("larkline_synthesis_model_gate_waiting") > 0
	})
	for i, st := range e.windowStates(keys) {
		if st.ID != 0 && (st.Attempts > 1 || (st.Status == store.WindowFailed && st.Attempts >= o.MaxAttempts)) {
			t.Fatalf("window %d during the outage: %s at attempt %d; the outage spent its attempts", i, st.Status, st.Attempts)
		}
	}
	if c := e.committed(); c > offs[0] {
		t.Fatalf("offset %d committed during the outage: no window is terminal", c)
	}
	// Bounded calls: before the gate first opened at most MaxConcurrentSynthesis
	// attempts made ChunkRetries+1 calls each; after that only probes call, one per
	// opening of the gate.
	down, _ := model.calls()
	openCount := r.counter("larkline_synthesis_model_gate_opens_total")
	if bound := o.MaxConcurrentSynthesis*(*o.ChunkRetries+1) + int(openCount); down > bound {
		t.Fatalf("%d model calls during the outage with the gate opened %v times; want at most %d", down, openCount, bound)
	}

	model.setDown(false)
	for i, k := range keys {
		var st store.WindowState
		eventually(t, fmt.Sprintf("window %d to complete", i), func() bool {
			s, err := e.st.GetWindow(context.Background(), k)
			st = s
			return err == nil && terminal(s)
		})
		if st.Status != store.WindowCompleted || st.Attempts != 1 {
			t.Errorf("window %d: %s at attempt %d, want completed at attempt 1 (the outage counts no attempt)", i, st.Status, st.Attempts)
		}
		if st.Meta.Error != "" {
			t.Errorf("window %d keeps the outage's diagnostics after success: %q", i, st.Meta.Error)
		}
	}
	eventually(t, "every record to be committed", func() bool { return e.committed() == offs[len(offs)-1]+1 })
	if got := r.counter("larkline_synthesis_model_available"); got != 1 {
		t.Errorf("model_available = %v after the outage, want 1", got)
	}
	if got := r.counter("larkline_synthesis_model_outage_seconds_total"); got <= 0 {
		t.Errorf("model_outage_seconds_total = %v after an outage", got)
	}
	if got := r.counter("larkline_synthesis_windows_total", "outcome", outcomeFailed); got != 0 {
		t.Errorf("%v windows failed for good", got)
	}
	// Every opening after the first followed a failed probe.
	if failedProbes := r.counter("larkline_synthesis_model_probes_total", "outcome", probeFailed); failedProbes < opens-1 ||
		r.counter("larkline_synthesis_model_gate_opens_total", "cause", openProbeFailed) != failedProbes ||
		r.counter("larkline_synthesis_model_gate_opens_total", "cause", openRetriesExhausted) != 1 {
		t.Errorf("failed probes %v should each reopen the gate (opens: probe_failed %v, retries_exhausted %v)", failedProbes,
			r.counter("larkline_synthesis_model_gate_opens_total", "cause", openProbeFailed),
			r.counter("larkline_synthesis_model_gate_opens_total", "cause", openRetriesExhausted))
	}
	refunded := r.counter("larkline_synthesis_attempts_refunded_total")
	if refunded < 1 || r.counter("larkline_synthesis_attempt_failures_total", "reason", reasonModelUnavailable) != refunded {
		t.Errorf("refunded attempts %v should be every model_unavailable failure (%v)", refunded,
			r.counter("larkline_synthesis_attempt_failures_total", "reason", reasonModelUnavailable))
	}
}

// TestWindowFailuresStillBoundedAfterAnOutage: an outage first (refunded), then the
// model answers badly for this window — invalid output or a rejected request. Those
// are the window's own failures: they count, and the window fails for good after
// MaxAttempts; the record is committed.
func TestWindowFailuresStillBoundedAfterAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
		reason string
	}{
		{"invalid output", fmt.Errorf("fake model: %w", synth.ErrInvalidOutput), reasonInvalidOutput},
		{"rejected request", fmt.Errorf("fake model: HTTP 400: %w", synth.ErrRejected), reasonModelRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			rows := e.seed(win, incidentLines...)
			o := e.options()
			o.MaxAttempts, o.ChunkRetries = 2, new(0)
			o.ModelOutageBackoffMax = 100 * time.Millisecond
			model := &flakyModel{next: o.Synthesizer, fail: tc.answer, down: true}
			o.Synthesizer = model
			r := e.start(o)
			off := e.produce(e.closedWindow(win, rows))[0]

			eventually(t, "the gate to open three times", func() bool {
				return r.counter("larkline_synthesis_model_gate_opens_total") >= 3
			})
			model.setDown(false)
			st := e.waitState(win, "the window to fail for good", func(s store.WindowState) bool {
				return s.Status == store.WindowFailed && s.Attempts == o.MaxAttempts
			})
			eventually(t, "the offset commit", func() bool { return e.committed() == off+1 })
			if st.Meta.RefundedAttempts < 3 || !strings.Contains(st.Meta.Error, tc.reason) {
				t.Errorf("window: %d refunded attempts, diagnostics %q; want at least 3 and reason %s",
					st.Meta.RefundedAttempts, st.Meta.Error, tc.reason)
			}
			if _, up := model.calls(); up != o.MaxAttempts {
				t.Errorf("%d calls after the outage, want %d (one per counted attempt)", up, o.MaxAttempts)
			}
			if got := r.counter("larkline_synthesis_attempt_failures_total", "reason", tc.reason); got != float64(o.MaxAttempts) {
				t.Errorf("%s failures = %v, want %d", tc.reason, got, o.MaxAttempts)
			}
			if got := r.counter("larkline_synthesis_windows_total", "outcome", outcomeFailed); got != 1 {
				t.Errorf("failed windows = %v, want 1", got)
			}
			if got := r.counter("larkline_synthesis_model_available"); got != 1 {
				t.Errorf("model_available = %v: an answer, even a bad one, ends the outage", got)
			}
		})
	}
}

// TestShutdownDuringModelOutage: windows wait for the gate of a model that never comes
// back. Closing the worker returns promptly even with a drain timeout far beyond the
// test's deadline: waiting windows hold no claim and just stop. No window is left
// processing or with an attempt spent, nothing is committed, and a new worker
// completes them once the model is back.
func TestShutdownDuringModelOutage(t *testing.T) {
	e := newEnv(t)
	keys, cws := e.outageWindows(3)
	o := e.options()
	o.MaxAttempts, o.ChunkRetries = 1, new(0)
	o.ModelOutageBackoffMax = time.Minute
	o.DrainTimeout = time.Hour // Run must not need it: nothing waits in an attempt
	model := &flakyModel{next: o.Synthesizer, down: true}
	o.Synthesizer = model
	r := e.start(o)
	offs := e.produce(cws...)
	eventually(t, "every window to wait for the gate", func() bool {
		return r.counter("larkline_synthesis_model_gate_waiting") == float64(len(keys))
	})
	r.stop(t) // bounded by waitFor, far below DrainTimeout
	if t.Failed() {
		t.FailNow()
	}
	for i, st := range e.windowStates(keys) {
		if st.ID != 0 && (st.Status != store.WindowFailed || st.Attempts != 0) {
			t.Fatalf("window %d after shutdown: %s at attempt %d; want untouched or refunded (failed at 0)", i, st.Status, st.Attempts)
		}
	}
	if c := e.committed(); c > offs[0] {
		t.Fatalf("offset %d committed although no window finished", c)
	}

	model.setDown(false)
	o2 := o
	o2.Registry, o2.DrainTimeout = nil, 5*time.Second
	e.start(o2)
	for i, k := range keys {
		eventually(t, fmt.Sprintf("window %d to complete after the restart", i), func() bool {
			s, err := e.st.GetWindow(context.Background(), k)
			return err == nil && s.Status == store.WindowCompleted && s.Attempts == 1
		})
	}
	eventually(t, "every record to be committed", func() bool { return e.committed() == offs[len(offs)-1]+1 })
}
