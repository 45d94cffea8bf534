package synthesis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// entryListCounter counts the existing-entry reads made through the wrapped store.
type entryListCounter struct {
	Store
	lists atomic.Int64
}

func (c *entryListCounter) ListEntries(ctx context.Context, ws ids.WorkspaceID, q store.EntryQuery) (store.EntryPage, error) {
	c.lists.Add(1)
	return c.Store.ListEntries(ctx, ws, q)
}

// TestContextAndExistingEntriesCanBeNone: MaxContextMessages and MaxExistingEntries
// are nil for the defaults and 0 for none (D33's rule). A 0 must not turn back into
// the default: with MaxContextMessages 0 no chunk gets a read-only context message,
// with MaxExistingEntries 0 no chunk gets existing entries and none are read.
func TestContextAndExistingEntriesCanBeNone(t *testing.T) {
	tests := []struct {
		name              string
		context, existing *int
		wantContext       bool
		wantListed        bool // existing entries read and given
	}{
		{name: "defaults", wantContext: true, wantListed: true},
		{name: "no context", context: new(0), wantListed: true},
		{name: "no existing entries", existing: new(0), wantContext: true},
		{name: "neither", context: new(0), existing: new(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			lines := contextBefore("omt_ctx", "payments-db shard %d is slow again")
			for i := range 9 {
				lines = append(lines, line{id: fmt.Sprintf("c%02d", i), at: time.Duration(i+1) * 10 * time.Second, sender: "Bob",
					text: fmt.Sprintf("rolled back payments-api, error rate back to 0.1%% (#%d)", i), thread: "omt_ctx"})
			}
			rows := e.seed(win, lines...)
			o := e.options()
			rec := &recorder{next: o.Synthesizer}
			counter := &entryListCounter{Store: o.Store}
			o.Synthesizer, o.Store = rec, counter
			o.EvidenceBatchLimit = 3 // three chunks: the later ones could be given the earlier ones' entries
			o.MaxContextMessages, o.MaxExistingEntries = tt.context, tt.existing
			e.start(o)
			e.produce(e.closedWindow(win, rows))
			st := e.waitState(win, "the window to finish", terminal)
			if st.Status != store.WindowCompleted {
				t.Fatalf("window %s (%s), want completed", st.Status, st.Meta.Error)
			}
			reqs := rec.requests()
			if len(reqs) < 3 {
				t.Fatalf("%d chunks, want at least 3", len(reqs))
			}
			contextGiven, existingGiven := 0, 0
			for _, req := range reqs {
				_, c := primaryIDs(req)
				contextGiven += len(c)
				existingGiven += len(req.Existing)
			}
			if got := contextGiven > 0; got != tt.wantContext {
				t.Errorf("MaxContextMessages %s: %d context messages given over %d chunks, want some: %v",
					show(tt.context), contextGiven, len(reqs), tt.wantContext)
			}
			listed := counter.lists.Load()
			t.Logf("%d chunks, %d context messages, %d existing entries given, %d entry reads", len(reqs), contextGiven, existingGiven, listed)
			if got := listed > 0; got != tt.wantListed {
				t.Errorf("MaxExistingEntries %s: existing entries read %d times, want some: %v", show(tt.existing), listed, tt.wantListed)
			}
			if got := existingGiven > 0; got != tt.wantListed {
				t.Errorf("MaxExistingEntries %s: %d existing entries given over %d chunks, want some: %v",
					show(tt.existing), existingGiven, len(reqs), tt.wantListed)
			}
		})
	}
}

func show(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
