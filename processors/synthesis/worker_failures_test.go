package synthesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/openai"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// incidentLines is a small incident conversation the rule synthesizer finds
// timeline-worthy.
var incidentLines = []line{
	{id: "1", at: 5 * time.Second, sender: "Alice", text: "Checkout error rate is at 12%, customers can't pay. Declaring SEV2."},
	{id: "2", at: 20 * time.Second, sender: "Bob", text: "+1"},
	{id: "3", at: time.Minute, sender: "Bob", text: "Logs show connection pool exhaustion on payments-db primary", thread: "omt_db"},
	{id: "4", at: 2 * time.Minute, sender: "Alice", text: "We decided to roll back payments-api to v2.13.2. Bob owns the rollback.", thread: "omt_db"},
	{id: "5", at: 4 * time.Minute, sender: "Bob", text: "Error rate back to 0.3%, p99 back to normal. Checkout recovered."},
}

// TestModelFailureThenWindowRetry: the model is unavailable for every try of the
// first attempt's chunk; the attempt fails and is refunded, the model gate opens, and
// after its pause the window is claimed again (retried) as the gate's probe and
// succeeds, still at attempt 1. The record is committed only then.
func TestModelFailureThenWindowRetry(t *testing.T) {
	e := newEnv(t)
	rows := e.seed(win, incidentLines...)
	o := e.options()
	o.ChunkRetries = new(1) // two tries per chunk
	rec := &recorder{next: o.Synthesizer, fail: func(n int, _ synth.Request) error {
		if n <= 2 {
			return fmt.Errorf("fake endpoint: %w", synth.ErrUnavailable)
		}
		return nil
	}}
	o.Synthesizer = rec
	r := e.start(o)
	off := e.produce(e.closedWindow(win, rows))[0]

	st := e.waitState(win, "the window to complete", terminal)
	if st.Status != store.WindowCompleted || st.Attempts != 1 || st.Meta.RefundedAttempts != 1 {
		t.Fatalf("window %s at attempt %d (%d refunded), want completed at attempt 1 after 1 refund",
			st.Status, st.Attempts, st.Meta.RefundedAttempts)
	}
	if st.Meta.Error != "" {
		t.Errorf("diagnostics of the failed attempt kept after success: %q", st.Meta.Error)
	}
	// The commit follows the window's metrics: once it happened they are final.
	eventually(t, "the offset commit", func() bool { return e.committed() == off+1 })
	if n := len(rec.requests()); n != 3 {
		t.Errorf("%d synthesize calls, want 3 (two tries, then the retried window)", n)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"larkline_synthesis_attempt_failures_total", []string{"reason", reasonModelUnavailable}, 1},
		{"larkline_synthesis_chunk_retries_total", []string{"reason", "unavailable"}, 1},
		{"larkline_synthesis_window_retries_total", nil, 1},
		{"larkline_synthesis_claims_total", []string{"outcome", "retried"}, 1},
		{"larkline_synthesis_windows_total", []string{"outcome", outcomeCompleted}, 1},
		{"larkline_synthesis_attempts_refunded_total", nil, 1},
		{"larkline_synthesis_model_gate_opens_total", []string{"cause", openRetriesExhausted}, 1},
		{"larkline_synthesis_model_probes_total", []string{"outcome", probeOK}, 1},
		{"larkline_synthesis_model_available", nil, 1},
		{"larkline_synthesis_model_gate_waiting", nil, 0},
	} {
		if got := r.counter(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if len(e.entries()) == 0 {
		t.Error("no entries after the successful attempt")
	}
}

// TestInvalidOutputUntilTheBoundFails drives the OpenAI-compatible client against a
// local endpoint that always cites evidence outside the chunk: the client retries
// within its bound, the attempt fails, the window is retried up to MaxAttempts and
// then stays failed with diagnostics; the record is committed.
func TestInvalidOutputUntilTheBoundFails(t *testing.T) {
	e := newEnv(t)
	rows := e.seed(win, incidentLines...)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		content, _ := json.Marshal(map[string]any{"entries": []any{map[string]any{
			"kind": "mitigation", "title": "Rolled back payments-api", "body": "",
			"occurred_at": win.Add(time.Minute).Format(time.RFC3339), "evidence_ids": []int64{999999}}}})
		resp, _ := json.Marshal(map[string]any{"model": "fake", "choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": string(content)}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry() // the client's metrics and the worker's side by side
	client, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1", Model: "fake", MaxRetries: new(1),
		BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	o := e.options()
	o.Registry = reg
	o.Synthesizer, o.Summarizer = client, client
	o.MaxAttempts = 2
	r := e.start(o)
	off := e.produce(e.closedWindow(win, rows))[0]

	st := e.waitState(win, "the window to fail for good", func(s store.WindowState) bool {
		return s.Status == store.WindowFailed && s.Attempts == 2
	})
	eventually(t, "the offset commit", func() bool { return e.committed() == off+1 })
	if got := calls.Load(); got != 4 {
		t.Errorf("%d model calls, want 4 (2 attempts × 2 tries of the client)", got)
	}
	if !strings.Contains(st.Meta.Error, reasonInvalidOutput) || !strings.Contains(st.Meta.Error, "999999") {
		t.Errorf("diagnostics %q should name the reason and the bad evidence id", st.Meta.Error)
	}
	for _, l := range incidentLines {
		if strings.Contains(st.Meta.Error, l.text) {
			t.Fatalf("diagnostics carry message text: %q", st.Meta.Error)
		}
	}
	if n := len(e.entries()); n != 0 {
		t.Errorf("%d entries from invalid output", n)
	}
	if got := r.counter("larkline_synthesis_windows_total", "outcome", outcomeFailed); got != 1 {
		t.Errorf("failed windows = %v, want 1", got)
	}
	if got := r.counter("larkline_synthesis_validation_errors_total"); got != 2 {
		t.Errorf("validation errors = %v, want 2", got)
	}
	if got := r.counter("larkline_synthesis_model_requests_total", "outcome", "invalid_output"); got != 4 {
		t.Errorf("client's invalid answers = %v, want 4", got)
	}
}

var errCrash = errors.New("simulated crash after claim")

// TestCrashWhileProcessingThenStaleTakeover: a worker claims a window and dies (the
// hook abandons the attempt without any write). A second worker that never sees a
// record for it (it consumes another topic) finds the window stale in its periodic
// sweep, takes it over and completes it.
func TestCrashWhileProcessingThenStaleTakeover(t *testing.T) {
	e := newEnv(t)
	rows := e.seed(win, incidentLines...)

	o1 := e.options()
	claimed := make(chan store.WindowState, 1)
	o1.afterClaim = func(_ context.Context, st store.WindowState) error {
		claimed <- st
		return errCrash
	}
	w1 := e.start(o1)
	off := e.produce(e.closedWindow(win, rows))[0]
	var st store.WindowState
	select {
	case st = <-claimed:
	case <-time.After(waitFor):
		t.Fatal("the first worker never claimed the window")
	}
	w1.stop(t)
	if st.Status != store.WindowProcessing || st.Attempts != 1 {
		t.Fatalf("claimed window %s at attempt %d", st.Status, st.Attempts)
	}
	if c := e.committed(); c > off {
		t.Fatalf("the crashed window's record was committed (offset %d)", c)
	}

	o2 := e.options()
	o2.Topic = e.newTopic(t) // no record: only the sweep can find the window
	o2.Group = e.group + "-sweeper"
	o2.StaleTimeout, o2.ScanInterval = 3*time.Second, 200*time.Millisecond
	o2.ChunkTimeout, o2.ChunkRetries = 500*time.Millisecond, new(0)
	w2 := e.start(o2)
	done := e.waitState(win, "the stale window to be taken over and completed", terminal)
	if done.Status != store.WindowCompleted || done.Attempts != 2 {
		t.Fatalf("window %s at attempt %d, want completed at attempt 2", done.Status, done.Attempts)
	}
	if got := w2.counter("larkline_synthesis_claims_total", "outcome", "taken_over"); got != 1 {
		t.Errorf("takeovers = %v, want 1", got)
	}
	if len(e.entries()) == 0 {
		t.Error("no entries after the takeover")
	}
}

// TestEvidenceNeverInTheTable: a closed window whose evidence the table does not hold
// although the sink is past its range spends no attempt: after MaxAttempts empty
// claims it ends needing attention, with diagnostics, and its offset is committed.
func TestEvidenceNeverInTheTable(t *testing.T) {
	e := newEnv(t)
	cw := e.closedWindow(win, []store.Evidence{e.evidence(win, incidentLines[0]), e.evidence(win, incidentLines[1])})
	o := e.options()
	o.MaxAttempts = 2
	r := e.start(o)
	off := e.produce(cw)[0]
	st := e.waitState(win, "the window to need attention", func(s store.WindowState) bool {
		return s.Status == store.WindowNeedsAttention
	})
	if !strings.Contains(st.Meta.Error, "up to offset 2, but the table holds no evidence") || st.Attempts != 0 {
		t.Errorf("diagnostics %q (attempts %d) should say the evidence is missing, with no attempt spent", st.Meta.Error, st.Attempts)
	}
	eventually(t, "the needs_attention outcome", func() bool {
		return r.counter("larkline_synthesis_windows_total", "outcome", outcomeNeedsAttention) == 1
	})
	eventually(t, "the offset commit", func() bool { return e.committed() == off+1 })
}

// TestBadRecordsAreDeadLettered: records that are no closed window, whose key does not
// match their value, or whose window is not aligned to its length are parked in the
// dead-letter topic with their reason, create no window state, and are committed.
func TestBadRecordsAreDeadLettered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(e *env) (key, value []byte)
		reason string
	}{
		{name: "not avro", reason: schemas.ReasonMalformed, record: func(e *env) ([]byte, []byte) {
			return []byte(string(e.ws) + "/" + string(e.chat)), []byte("not avro")
		}},
		{name: "key of another chat", reason: schemas.ReasonInvalidRecord, record: func(e *env) ([]byte, []byte) {
			rows := e.seed(win, incidentLines...)
			v, err := e.codecs.ClosedWindow.Encode(context.Background(), e.closedWindow(win, rows))
			if err != nil {
				t.Fatal(err)
			}
			return []byte(string(e.ws) + "/oc_other"), v
		}},
		{name: "window not aligned to its length", reason: schemas.ReasonInvalidRecord, record: func(e *env) ([]byte, []byte) {
			rows := e.seed(win, incidentLines...)
			cw := e.closedWindow(win, rows)
			cw.WindowStart = win.Add(3 * time.Second)
			if cw.FirstOccurredAt.Before(cw.WindowStart) { // the first message is before the shifted start
				cw.FirstOccurredAt = cw.WindowStart
			}
			v, err := e.codecs.ClosedWindow.Encode(context.Background(), cw)
			if err != nil {
				t.Fatal(err)
			}
			return []byte(cw.Key()), v
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			key, value := tc.record(e)
			r := e.start(e.options())
			off := e.produceRaw(key, value)
			eventually(t, "the offset commit", func() bool { return e.committed() == off+1 })
			if got := r.counter("larkline_synthesis_records_total", "result", "dead_lettered"); got != 1 {
				t.Fatalf("dead-lettered records = %v, want 1", got)
			}
			dl := e.readDeadLetter()
			if dl.Stage != string(ids.StageSynthesis) || dl.Offset != off || !bytes.Equal(dl.Value, value) || dl.Reason != tc.reason {
				t.Fatalf("dead letter: stage %q offset %d reason %q (want %q), error %q", dl.Stage, dl.Offset, dl.Reason, tc.reason, dl.Error)
			}
			if _, err := e.st.GetWindow(context.Background(), e.key(win)); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a window state exists for a bad record: %v", err)
			}
		})
	}
}
