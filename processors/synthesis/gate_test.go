package synthesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

func newTestGate(t *testing.T, pause time.Duration) *modelGate {
	t.Helper()
	o := Options{RetryBackoffMin: pause, ModelOutageBackoffMax: pause}
	g := newModelGate(&o, slog.New(slog.DiscardHandler))
	m, err := newMetrics(prometheus.NewRegistry(), g.outageSeconds)
	if err != nil {
		t.Fatal(err)
	}
	g.m = m
	return g
}

// passAsync runs pass in a goroutine and delivers its result.
func passAsync(ctx context.Context, g *modelGate) <-chan *gateTicket {
	ch := make(chan *gateTicket, 1)
	go func() {
		tk, err := g.pass(ctx)
		if err != nil {
			tk = nil
		}
		ch <- tk
	}()
	return ch
}

func receive(t *testing.T, ch <-chan *gateTicket, what string) *gateTicket {
	t.Helper()
	select {
	case tk := <-ch:
		return tk
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
}

// notYet checks that ch delivered nothing so far (a window still waiting).
func notYet(t *testing.T, ch <-chan *gateTicket, what string) {
	t.Helper()
	select {
	case tk := <-ch:
		t.Fatalf("%s passed the gate (%+v)", what, tk)
	default:
	}
}

func TestModelGateStates(t *testing.T) {
	ctx := context.Background()
	outage := fmt.Errorf("fake: %w", synth.ErrUnavailable)

	t.Run("closed lets every window through and allows calls", func(t *testing.T) {
		g := newTestGate(t, time.Hour)
		tk, err := g.pass(ctx)
		if err != nil || tk.probe || !g.allow(tk) || !g.closed() {
			t.Fatalf("closed gate: ticket %+v err %v allow %v", tk, err, g.allow(tk))
		}
		g.answered(tk) // an answer on a closed gate changes nothing
		if got := testutil.ToFloat64(g.m.modelAvailable); got != 1 {
			t.Fatalf("model_available = %v, want 1", got)
		}
	})

	t.Run("an open gate blocks claims and calls until its period ends", func(t *testing.T) {
		g := newTestGate(t, time.Hour)
		running, _ := g.pass(ctx)
		g.failed(running, outage)
		if g.allow(running) || g.closed() {
			t.Fatal("an attempt that passed before the gate opened may still call the model")
		}
		if got := testutil.ToFloat64(g.m.modelAvailable); got != 0 {
			t.Fatalf("model_available = %v, want 0", got)
		}
		g.failed(running, outage) // a second report of the same outage changes nothing
		if got := testutil.ToFloat64(g.m.modelGateOpens.WithLabelValues(openRetriesExhausted)); got != 1 {
			t.Fatalf("gate opens = %v, want 1", got)
		}
		wctx, cancel := context.WithCancel(ctx)
		waiter := passAsync(wctx, g)
		eventually(t, "the window to wait", func() bool { return testutil.ToFloat64(g.m.modelWaiting) == 1 })
		notYet(t, waiter, "a window during the open period")
		cancel()
		if tk := receive(t, waiter, "the canceled wait"); tk != nil {
			t.Fatalf("a canceled wait got ticket %+v", tk)
		}
		eventually(t, "the waiting gauge to drop", func() bool { return testutil.ToFloat64(g.m.modelWaiting) == 0 })
		if g.outageSeconds() <= 0 {
			t.Fatal("no outage time while the gate is open")
		}
	})

	t.Run("one probe at a time; its answer releases every waiter", func(t *testing.T) {
		g := newTestGate(t, time.Millisecond)
		g.failed(&gateTicket{}, outage)
		probe := receive(t, passAsync(ctx, g), "the probe")
		if !probe.probe || !g.allow(probe) {
			t.Fatalf("first window after the pause: %+v, allowed %v; want the probe", probe, g.allow(probe))
		}
		waiters := []<-chan *gateTicket{passAsync(ctx, g), passAsync(ctx, g), passAsync(ctx, g)}
		eventually(t, "the windows to wait", func() bool { return testutil.ToFloat64(g.m.modelWaiting) == 3 })
		for i, w := range waiters {
			notYet(t, w, fmt.Sprintf("window %d while the probe runs", i))
		}
		if other := (&gateTicket{}); g.allow(other) {
			t.Fatal("a non-probe attempt may call while the gate probes")
		}
		g.answered(probe)
		for i, w := range waiters {
			if tk := receive(t, w, fmt.Sprintf("window %d after the probe", i)); tk == nil || tk.probe {
				t.Fatalf("window %d after a good probe: %+v", i, tk)
			}
		}
		g.done(probe)
		if !g.closed() || testutil.ToFloat64(g.m.modelProbes.WithLabelValues(probeOK)) != 1 ||
			testutil.ToFloat64(g.m.modelAvailable) != 1 {
			t.Fatal("a good probe did not close the gate and count itself")
		}
		if g.period.n != 0 {
			t.Fatalf("the pause did not reset after the outage: %d steps", g.period.n)
		}
	})

	t.Run("a failed probe opens the gate again for a longer period", func(t *testing.T) {
		g := newTestGate(t, time.Millisecond)
		g.period.max = time.Hour
		g.failed(&gateTicket{}, outage)
		probe := receive(t, passAsync(ctx, g), "the probe")
		g.failed(probe, outage)
		if g.closed() || g.allow(probe) || g.period.n != 2 {
			t.Fatalf("after a failed probe: closed %v, allowed %v, %d steps", g.closed(), g.allow(probe), g.period.n)
		}
		if got := testutil.ToFloat64(g.m.modelGateOpens.WithLabelValues(openProbeFailed)); got != 1 {
			t.Fatalf("probe_failed opens = %v, want 1", got)
		}
		g.done(probe) // a probe that reported is not abandoned
		if got := testutil.ToFloat64(g.m.modelProbes.WithLabelValues(probeAbandoned)); got != 0 {
			t.Fatalf("abandoned probes = %v, want 0", got)
		}
	})

	t.Run("a probe that made no call hands the probe on", func(t *testing.T) {
		g := newTestGate(t, time.Millisecond)
		g.failed(&gateTicket{}, outage)
		first := receive(t, passAsync(ctx, g), "the probe")
		next := passAsync(ctx, g)
		eventually(t, "the next window to wait", func() bool { return testutil.ToFloat64(g.m.modelWaiting) == 1 })
		g.done(first)
		second := receive(t, next, "the next probe")
		if !second.probe || !g.allow(second) || g.allow(first) {
			t.Fatalf("after an abandoned probe: next %+v allowed %v, old allowed %v", second, g.allow(second), g.allow(first))
		}
		if got := testutil.ToFloat64(g.m.modelProbes.WithLabelValues(probeAbandoned)); got != 1 {
			t.Fatalf("abandoned probes = %v, want 1", got)
		}
	})
}

func TestIsModelOutage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", synth.ErrUnavailable), true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("x: %w", synth.ErrInvalidOutput), false},
		{fmt.Errorf("x: %w", synth.ErrRejected), false},
		{fmt.Errorf("x: %w", synth.ErrInvalidRequest), false},
		{context.Canceled, false},
		{errors.New("anything else"), false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			if got := isModelOutage(tc.err); got != tc.want {
				t.Fatalf("isModelOutage(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
