package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeModel is an OpenAI-compatible chat-completions endpoint that answers like a
// well-behaved model: one finding per conversation group, citing the group's first
// primary message, and a summary naming how many entries it saw. Its answers never
// repeat message text. It can be slowed down and taken down.
type fakeModel struct {
	srv      *httptest.Server
	delay    atomic.Int64 // time.Duration
	down     atomic.Bool
	total    atomic.Int64
	failed   atomic.Int64
	inFlight atomic.Int64
	mu       sync.Mutex
	summary  int
	// chunks counts the synthesis calls answered per chunk, a chunk named by its
	// lowest primary evidence id.
	chunks map[int64]int
	// systems holds every system prompt received.
	systems map[string]bool
}

func newFakeModel(t testing.TB) *fakeModel {
	m := &fakeModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *fakeModel) url() string { return m.srv.URL + "/v1" }

func (m *fakeModel) setDelay(d time.Duration) { m.delay.Store(int64(d)) }

// setDown makes every call fail with 503 (true) or answer again.
func (m *fakeModel) setDown(down bool) { m.down.Store(down) }

func (m *fakeModel) calls() int64 { return m.total.Load() }

func (m *fakeModel) summaries() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.summary
}

func (m *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	m.total.Add(1)
	m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if d := time.Duration(m.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	if m.down.Load() {
		m.failed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"model overloaded","type":"server_error"}}`)
		return
	}
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	user := req.Messages[len(req.Messages)-1].Content
	m.mu.Lock()
	if m.systems == nil {
		m.systems = map[string]bool{}
	}
	m.systems[req.Messages[0].Content] = true
	m.mu.Unlock()
	// The data comes as one delimited block of untrusted chat data (issue #29): the
	// JSON is the line between the opening and the closing line.
	if lines := strings.Split(user, "\n"); len(lines) == 3 && strings.HasPrefix(lines[0], "<untrusted-chat-data ") {
		user = lines[1]
	}
	var in struct {
		Groups []struct {
			Group    string `json:"group"`
			Messages []struct {
				ID      int64  `json:"id"`
				Time    string `json:"time"`
				Context bool   `json:"context"`
			} `json:"messages"`
		} `json:"groups"`
		Entries []json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal([]byte(user), &in); err != nil {
		http.Error(w, "user message is not JSON", http.StatusBadRequest)
		return
	}
	var content any
	if strings.Contains(req.Messages[0].Content, `{"summary":`) {
		m.mu.Lock()
		m.summary++
		m.mu.Unlock()
		content = map[string]any{"summary": fmt.Sprintf("Status: %d timeline entries so far.", len(in.Entries))}
	} else {
		first := int64(-1)
		for _, g := range in.Groups {
			for _, msg := range g.Messages {
				if !msg.Context && (first < 0 || msg.ID < first) {
					first = msg.ID
				}
			}
		}
		m.mu.Lock()
		if m.chunks == nil {
			m.chunks = map[int64]int{}
		}
		m.chunks[first]++
		m.mu.Unlock()
		entries := []any{}
		for i, g := range in.Groups {
			for _, msg := range g.Messages {
				if msg.Context {
					continue
				}
				entries = append(entries, map[string]any{
					"kind": "finding", "title": fmt.Sprintf("Finding %d of the window, message %d", i+1, msg.ID),
					"body": "", "occurred_at": msg.Time, "evidence_ids": []int64{msg.ID},
				})
				break
			}
		}
		content = map[string]any{"entries": entries}
	}
	b, _ := json.Marshal(content)
	resp, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-e2e", "object": "chat.completion", "model": req.Model, // as a real endpoint, the model asked for
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": string(b)}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": len(user) / 4, "completion_tokens": len(b) / 4, "total_tokens": (len(user) + len(b)) / 4},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp)
}

// sawSystemPrompt reports whether a system prompt holding s was received.
func (m *fakeModel) sawSystemPrompt(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.systems {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

// chunkCalls is how many times each chunk was answered (by its lowest primary
// evidence id).
func (m *fakeModel) chunkCalls() map[int64]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.chunks)
}

// waitCalls waits until the model received at least n calls.
func (m *fakeModel) waitCalls(ctx context.Context, n int64, deadline time.Duration) error {
	return waitFor(ctx, deadline, func() bool { return m.calls() >= n }, func() string {
		return fmt.Sprintf("model calls %d, want %d", m.calls(), n)
	})
}

// waitInFlight waits until a call is being answered.
func (m *fakeModel) waitInFlight(ctx context.Context, deadline time.Duration) error {
	return waitFor(ctx, deadline, func() bool { return m.inFlight.Load() > 0 }, func() string { return "no model call in flight" })
}

func waitFor(ctx context.Context, deadline time.Duration, ok func() bool, state func() string) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %s", deadline, state())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
