package windows

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/ids"
	"github.com/larkline/larkline/schemas"
)

// evidenceOp is one evidence version fed to a harness.
type evidenceOp struct {
	msg     string
	at      time.Duration
	label   string
	deleted bool
}

func (h *harness) feed(ops []evidenceOp) {
	h.t.Helper()
	for _, o := range ops {
		if o.deleted {
			h.evidence(o.msg, t0.Add(o.at), o.label, func(e *schemas.EvidenceRecord) {
				e.Deleted, e.Content, e.SynthesisEligible = true, "", false
			})
			continue
		}
		h.evidence(o.msg, t0.Add(o.at), o.label)
	}
}

// randomOps makes a delivery of n messages of one window with redeliveries, edits,
// recalls of held messages, recalls of never-seen messages and out-of-order arrival.
func randomOps(seed uint64, n int) []evidenceOp {
	r := rand.New(rand.NewPCG(seed, 1))
	var ops []evidenceOp
	for i := range n {
		msg := fmt.Sprintf("om_%03d", i)
		at := time.Duration(r.IntN(9*60)) * time.Second
		ops = append(ops, evidenceOp{msg: msg, at: at, label: msg + "-v1"})
		switch r.IntN(6) {
		case 0:
			ops = append(ops, evidenceOp{msg: msg, at: at, label: msg + "-v1"}) // redelivery
		case 1:
			ops = append(ops, evidenceOp{msg: msg, at: at, label: msg + "-v2"}) // edit
		case 2:
			ops = append(ops, evidenceOp{msg: msg, at: at, label: msg + "-del", deleted: true}) // recall
		case 3:
			ghost := fmt.Sprintf("om_g%03d", i) // a recall of a message never seen
			ops = append(ops, evidenceOp{msg: ghost, at: at, label: ghost + "-del", deleted: true})
			if r.IntN(2) == 0 { // ... whose original arrives after the recall
				ops = append(ops, evidenceOp{msg: ghost, at: at, label: ghost + "-v1"})
			}
		}
	}
	r.Shuffle(len(ops), func(i, j int) {
		// keep each message's versions in order; shuffle only across messages
		if ops[i].msg != ops[j].msg {
			ops[i], ops[j] = ops[j], ops[i]
		}
	})
	return ops
}

// TestPagedWindowMatchesUnpaged feeds the same deliveries to a processor whose
// windows seal pages every few refs and to one whose windows never page, and wants
// identical closed records (ordered evidence, count, aggregate hash).
func TestPagedWindowMatchesUnpaged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pageSize int
		seed     uint64
		n        int
	}{
		{"page of 1", 1, 1, 12},
		{"page of 3", 3, 2, 40},
		{"page of 7", 7, 3, 60},
		{"page of 3, other order", 3, 4, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := randomOps(tc.seed, tc.n)
			unpaged := newHarness(t, func(o *Options) { o.pageSize = 1 << 20 })
			paged := newHarness(t, func(o *Options) { o.pageSize = tc.pageSize })
			unpaged.feed(ops)
			paged.feed(ops)
			if v := testutil.ToFloat64(paged.p.m.pagesSealed); v == 0 {
				t.Fatal("the paged processor sealed no page; the test exercises nothing")
			}
			unpaged.scanAt(t0.Add(13 * time.Minute))
			paged.scanAt(t0.Add(13 * time.Minute))
			want, got := unpaged.closedWindows(), paged.closedWindows()
			if len(want) != 1 || len(got) != 1 {
				t.Fatalf("closed windows: unpaged %d, paged %d; want 1 each", len(want), len(got))
			}
			w, g := want[0], got[0]
			if g.EvidenceCount != w.EvidenceCount || g.AggregateHash != w.AggregateHash ||
				!reflect.DeepEqual(g.Evidence, w.Evidence) {
				t.Fatalf("paged record differs:\n got %d %s %v\nwant %d %s %v",
					g.EvidenceCount, g.AggregateHash, g.Evidence, w.EvidenceCount, w.AggregateHash, w.Evidence)
			}
			if v := testutil.ToFloat64(paged.p.m.pagesMissing); v != 0 {
				t.Fatalf("%v pages missing", v)
			}
		})
	}
}

// TestPagedWindowBoundsAndRetention checks that a window's own value stays within
// two pages however much evidence it receives, that late evidence for a closed paged
// window is counted and never reopens it, and that pages go with the marker.
func TestPagedWindowBoundsAndRetention(t *testing.T) {
	const pageSize = 4
	h := newHarness(t, func(o *Options) { o.pageSize = pageSize })
	table := goka.GroupTable(GroupName("", "v1"))
	wk := windowKey(ids.ChatKey(ws, chat), t0)
	const n = 50
	for i := range n {
		h.evidence(fmt.Sprintf("om_%03d", i), t0.Add(time.Duration(i)*time.Second), fmt.Sprint(i))
		v := h.tt.TableValue(table, wk).(*tableValue)
		if l := len(v.Window.Msgs) + len(v.Window.Pending); l > 2*pageSize {
			t.Fatalf("after %d records the window value holds %d refs, more than two pages", i+1, l)
		}
	}
	v := h.tt.TableValue(table, wk).(*tableValue)
	pages := v.Window.Pages
	if pages != n/pageSize || v.Window.Pending != nil {
		t.Fatalf("pages %d pending %v; want %d acknowledged pages", pages, v.Window.Pending, n/pageSize)
	}
	for i := range pages {
		pv, _ := h.tt.TableValue(table, pageKey(wk, i)).(*tableValue)
		if pv == nil || pv.Page == nil || len(pv.Page.Refs) != pageSize {
			t.Fatalf("page %d: %+v", i, pv)
		}
	}
	// classified exactly while no page is acknowledged, logged (resolved at close) after
	added := testutil.ToFloat64(h.p.m.evidence.WithLabelValues("added"))
	logged := testutil.ToFloat64(h.p.m.evidence.WithLabelValues("logged"))
	if added != pageSize || logged != n-pageSize {
		t.Fatalf("added %v logged %v, want %d and %d", added, logged, pageSize, n-pageSize)
	}
	h.scanAt(t0.Add(13 * time.Minute))
	got := h.closedWindows()
	if len(got) != 1 || got[0].EvidenceCount != n {
		t.Fatalf("closed %+v", got)
	}
	for i, e := range got[0].Evidence {
		if want := fmt.Sprintf("om_%03d", i); string(e.MessageID) != want || e.ContentHash != hashOf(fmt.Sprint(i)) {
			t.Fatalf("evidence %d = %s %s, want %s", i, e.MessageID, e.ContentHash, want)
		}
	}
	h.evidence("om_late", t0.Add(time.Minute), "late")
	h.evidence("om_000", t0, "0-edited")
	h.scanAt(t0.Add(30 * time.Minute))
	if got := h.closedWindows(); len(got) != 0 {
		t.Fatalf("late evidence reopened a paged window: %+v", got)
	}
	if v := testutil.ToFloat64(h.p.m.late); v != 2 {
		t.Fatalf("late %v, want 2", v)
	}
	h.scanAt(t0.Add(10*time.Minute + 72*time.Hour + time.Minute))
	if v := h.tt.TableValue(table, wk); v != nil {
		t.Fatalf("marker kept past retention: %+v", v)
	}
	for i := range pages {
		if v := h.tt.TableValue(table, pageKey(wk, i)); v != nil {
			t.Fatalf("page %d kept past retention: %+v", i, v)
		}
	}
}

func TestSealResendsWhilePending(t *testing.T) {
	w := &windowState{Start: 1}
	now := t0
	var sent []int
	for i := range 9 {
		w.apply(msgRef{ID: fmt.Sprintf("om_%d", i), At: int64(i), Hash: "h"}, false, now)
		if page, refs, ok := w.seal(2); ok {
			if len(refs) != 2 {
				t.Fatalf("sealed %d refs, want 2", len(refs))
			}
			sent = append(sent, page)
		}
	}
	// page 0 sealed at 2 refs and never acknowledged: resent every 2 further refs
	if fmt.Sprint(sent) != "[0 0 0 0]" || w.Pages != 1 || len(w.Msgs) != 7 {
		t.Fatalf("seals %v, pages %d, own refs %d", sent, w.Pages, len(w.Msgs))
	}
	// an edit of a message of the pending page is logged after it, not lost
	if out := w.apply(msgRef{ID: "om_0", At: 0, Hash: "h2"}, false, now); out != outcomeUpdated {
		t.Fatalf("edit of a pending ref: %v", out)
	}
	f := newFold(nil)
	f.add(w.Pending)
	f.add(w.Msgs)
	if r := f.result(); len(r) != 9 || r[0].Hash != "h2" {
		t.Fatalf("fold %+v", r)
	}
}

func TestSplitPageKey(t *testing.T) {
	wk := windowKey(ids.ChatKey(ws, chat), t0)
	tests := []struct {
		key  string
		ok   bool
		page int
	}{
		{pageKey(wk, 0), true, 0},
		{pageKey(wk, 12), true, 12},
		{wk, false, 0},
		{ids.ChatKey(ws, chat), false, 0},
		{wk + "/page/x", false, 0},
		{wk + "/page/-1", false, 0},
		{ids.ChatKey(ws, chat) + "/page/1", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			gotWK, chatKey, start, page, ok := splitPageKey(tt.key)
			if ok != tt.ok || (ok && (page != tt.page || gotWK != wk || chatKey != ids.ChatKey(ws, chat) || !start.Equal(t0))) {
				t.Fatalf("splitPageKey(%q) = %q %q %v %d %v", tt.key, gotWK, chatKey, start, page, ok)
			}
		})
	}
}
