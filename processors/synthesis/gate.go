package synthesis

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/larkline/larkline/processors/synthesis/synth"
)

// errModelOutage is wrapped by the attempt failures a model outage caused: a chunk
// whose calls kept failing with retryable errors, or a call not made because the
// model gate was open. Such an attempt is refunded (store.RefundWindowAttempt), not
// counted against MaxAttempts.
var errModelOutage = errors.New("model outage")

// isModelOutage reports whether a Synthesize error says the model cannot be reached
// now (unavailable, timed out, rate-limited, 5xx) rather than that it answered badly:
// synth.IsRetryable without invalid output.
func isModelOutage(err error) bool {
	return synth.IsRetryable(err) && !errors.Is(err, synth.ErrInvalidOutput)
}

// gateState is the model gate's circuit-breaker state.
type gateState uint8

const (
	gateClosed  gateState = iota // the model answers: calls go through
	gateOpen                     // an outage: no call until the open period ends
	gateProbing                  // the period ended: one window's single call probes the model
)

// Probe outcomes (larkline_synthesis_model_probes_total{outcome}).
const (
	probeOK        = "ok"
	probeFailed    = "failed"
	probeAbandoned = "abandoned" // the probing window made no model call
)

// Gate open causes (larkline_synthesis_model_gate_opens_total{cause}).
const (
	openRetriesExhausted = "retries_exhausted"
	openProbeFailed      = "probe_failed"
)

// gateTicket is one window's pass through the model gate, held from its claim to the
// end of its attempt. The probe ticket is the only one that may call the model while
// the gate is probing.
type gateTicket struct{ probe bool }

// modelGate is the worker-wide circuit breaker in front of the synthesizer. A chunk
// that exhausted its ChunkRetries on outage errors opens it for an exponentially
// growing period with jitter (RetryBackoffMin doubling, capped at
// ModelOutageBackoffMax). While it is open no window claims (they wait in pass holding
// nothing: no claim, no slot) and attempts already running make no further call. When
// the period ends one waiting window passes as the probe and makes a single call: an
// answer closes the gate, an outage error opens it again for a longer period, and a
// probe that made no call (its window needed no model, or was busy elsewhere) hands
// the probe to the next waiter.
type modelGate struct {
	m   *metrics
	log *slog.Logger

	mu      sync.Mutex
	state   gateState
	until   time.Time     // end of the open period
	period  *retryDelay   // grows with consecutive opens; reset on close
	since   time.Time     // when the current outage began
	outage  time.Duration // outage time of past outages
	probe   *gateTicket   // the probing ticket while gateProbing
	changed chan struct{} // closed and replaced at every state change
}

func newModelGate(o *Options, log *slog.Logger) *modelGate {
	return &modelGate{
		log:     log,
		period:  &retryDelay{min: o.RetryBackoffMin, max: o.ModelOutageBackoffMax},
		changed: make(chan struct{}),
	}
}

// broadcast wakes every waiter; g.mu must be held.
func (g *modelGate) broadcast() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// pass waits until the gate lets a window that needs the model claim: at once while
// closed; otherwise until the open period ends and this window becomes the probe, or
// until another window's probe closed the gate. It returns only ctx's error. The
// ticket must be handed to done once the window's claim and attempt are over.
func (g *modelGate) pass(ctx context.Context) (*gateTicket, error) {
	waiting := false
	defer func() {
		if waiting {
			g.m.modelWaiting.Dec()
		}
	}()
	for {
		g.mu.Lock()
		now := time.Now()
		switch {
		case g.state == gateClosed:
			g.mu.Unlock()
			return &gateTicket{}, nil
		case g.state == gateOpen && !now.Before(g.until):
			tk := &gateTicket{probe: true}
			g.state, g.probe = gateProbing, tk
			g.mu.Unlock()
			return tk, nil
		}
		changed := g.changed
		var timer *time.Timer
		var expired <-chan time.Time
		if g.state == gateOpen {
			timer = time.NewTimer(g.until.Sub(now))
			expired = timer.C
		}
		g.mu.Unlock()
		if !waiting {
			waiting = true
			g.m.modelWaiting.Inc()
		}
		select {
		case <-changed:
		case <-expired:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// allow reports whether the holder of tk may call the model now: while the gate is
// closed, or as the probe while it probes.
func (g *modelGate) allow(tk *gateTicket) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state == gateClosed || (g.state == gateProbing && g.probe == tk)
}

// closed reports whether the gate is closed (a chunk may retry a failed call).
func (g *modelGate) closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state == gateClosed
}

// answered records that the model answered a call (any result but an outage error):
// the gate closes if it was not.
func (g *modelGate) answered(tk *gateTicket) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == gateClosed {
		return
	}
	if g.state == gateProbing && g.probe == tk {
		g.m.modelProbes.WithLabelValues(probeOK).Inc()
	}
	took := time.Since(g.since)
	g.outage += took
	g.state, g.probe = gateClosed, nil
	g.period.reset()
	g.m.modelAvailable.Set(1)
	g.broadcast()
	g.log.Info("the model answers again; synthesis resumes", "outage_seconds", took.Seconds())
}

// failed records an outage seen by tk's holder: a chunk that exhausted its retries
// while the gate was closed, or the probe's failed call. The gate opens (again) for
// the next period; an outage already recorded (the gate is open, or another window
// probes) changes nothing.
func (g *modelGate) failed(tk *gateTicket, cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	how := openRetriesExhausted
	switch {
	case g.state == gateClosed:
		g.since = time.Now()
	case g.state == gateProbing && g.probe == tk:
		how = openProbeFailed
		g.m.modelProbes.WithLabelValues(probeFailed).Inc()
	default:
		return
	}
	d := g.period.next()
	g.state, g.probe, g.until = gateOpen, nil, time.Now().Add(d)
	g.m.modelAvailable.Set(0)
	g.m.modelGateOpens.WithLabelValues(how).Inc()
	g.broadcast()
	g.log.Warn("the model is unavailable; synthesis pauses before the next probe", "cause", how,
		"pause", d.String(), "outage_seconds", time.Since(g.since).Seconds(), "error", cause)
}

// done ends tk's pass. A probe that never called the model hands the probe on: the
// gate is open with its period over, so the next waiter probes at once.
func (g *modelGate) done(tk *gateTicket) {
	if tk == nil || !tk.probe {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == gateProbing && g.probe == tk {
		g.state, g.probe, g.until = gateOpen, nil, time.Now()
		g.m.modelProbes.WithLabelValues(probeAbandoned).Inc()
		g.broadcast()
	}
}

// outageSeconds is the time the gate has not been closed, the current outage included.
func (g *modelGate) outageSeconds() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.outage
	if g.state != gateClosed {
		d += time.Since(g.since)
	}
	return d.Seconds()
}
