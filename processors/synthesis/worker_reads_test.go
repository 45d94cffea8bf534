package synthesis

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
)

// windowReadCounter counts the evidence reads of the window starting at start (not
// the context before it) made through the wrapped store.
type windowReadCounter struct {
	Store
	start time.Time
	mu    sync.Mutex
	reads int
}

func (c *windowReadCounter) EvidenceInRange(ctx context.Context, q store.RangeQuery) (store.EvidencePage, error) {
	if q.From.Equal(c.start) {
		c.mu.Lock()
		c.reads++
		c.mu.Unlock()
	}
	return c.Store.EvidenceInRange(ctx, q)
}

func (c *windowReadCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestWindowEvidenceReads: an attempt reads the window's evidence page by page and
// stops after a chunk that took the whole last page, without one more read that could
// only come back empty; every message is still counted in the window.
func TestWindowEvidenceReads(t *testing.T) {
	tests := []struct {
		name      string
		messages  int
		limit     int // EvidenceBatchLimit
		wantReads int
	}{
		{"one page", 5, 40, 1},
		{"exactly one full page", 3, 3, 1},
		{"two pages", 6, 3, 2},
		{"a short last page", 7, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			lines := make([]line, tt.messages)
			for i := range lines {
				lines[i] = line{id: fmt.Sprintf("r%02d", i), at: time.Duration(i+1) * time.Second,
					sender: "Alice", text: fmt.Sprintf("rolled back payments-api, error rate back to 0.1%% (#%d)", i)}
			}
			rows := e.seed(win, lines...)
			o := e.options()
			o.EvidenceBatchLimit = tt.limit
			c := &windowReadCounter{Store: o.Store, start: win}
			o.Store = c
			e.start(o)
			e.produce(e.closedWindow(win, rows))
			st := e.waitState(win, "the window to finish", terminal)
			if st.Meta.EvidenceCount != tt.messages {
				t.Fatalf("window counted %d evidence, want %d", st.Meta.EvidenceCount, tt.messages)
			}
			if got := c.count(); got != tt.wantReads {
				t.Fatalf("the attempt read the window's evidence %d times, want %d (chunks %d)", got, tt.wantReads, st.Meta.ChunkCount)
			}
		})
	}
}
