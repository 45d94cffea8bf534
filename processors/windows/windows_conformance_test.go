package windows

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// TestConformance runs the delivery-guarantee suite on the window processor: evidence
// topic in, closed-window topic out, on the real broker (newCluster, cluster.start).
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformanceStage{})
}

// The adapter's time: evidence of entity e occurs at t0 + e·37 s, so the suite's
// entities (up to 24) fill the windows starting at t0 and t0+10m of four chats.
// Observe moves the clock to confObserveAt, past every window's grace.
const (
	confChats   = 4
	confSpacing = 37 * time.Second
	confWindow  = 10 * time.Minute // cluster.start's Options.Window
	confObserve = time.Hour
	confNoScans = 24 * time.Hour // a scan interval no test reaches
)

var confObserveAt = t0.Add(confObserve)

// conformanceStage: an entity is one Lark message (evidence key
// <workspace>/<chat>/<message>), its versions are edits (a new content hash).
type conformanceStage struct{}

func (conformanceStage) Versions() int { return 3 }

func (conformanceStage) Deploy(t *testing.T) conformance.Deployment {
	return &conformanceDeployment{
		c:       newCluster(t),
		version: uniqueVersion(t),
		clock:   testenv.NewClock(t0),
		windows: map[string]bool{},
		labels:  map[string]string{},
	}
}

type conformanceDeployment struct {
	c       *cluster
	version string
	clock   *testenv.Clock
	running *instance
	windows map[string]bool   // group-table keys of the windows that received evidence
	labels  map[string]string // content hash → record label, to render what a window holds
}

func (d *conformanceDeployment) group() string { return string(GroupName("", d.version)) }

func (d *conformanceDeployment) Wiring() conformance.Wiring {
	return conformance.Wiring{
		Input: d.c.evidence,
		Group: d.group(),
		// Goka's loop topic (<group>-loop): evidence reaches its window, and a due
		// window closes, through it.
		Consumed: []string{d.group() + "-loop"},
	}
}

// Start runs a processor with cluster.start's options (memory storage: a new instance
// recovers the group table) but without periodic scans: Observe scans by hand. A
// processor stopped while a scan is in flight trips a data race inside Goka
// (Processor.VisitAllWithStats reads its visit counter while the visits it gave up on
// still add to it), which -race reports; the suite stops instances often, so scans
// must not be in flight then.
func (d *conformanceDeployment) Start(*testing.T) func() {
	inst := d.c.start(d.version, d.clock, func(o *Options) { o.ScanInterval = confNoScans })
	d.running = inst
	return func() {
		inst.stop()
		if d.running == inst {
			d.running = nil
		}
	}
}

// confEvidence is version r of the suite's entity as an evidence record.
func confEvidence(r conformance.Record) schemas.EvidenceRecord {
	chatID := ids.ChatID(fmt.Sprintf("oc_conf%d", r.Entity%confChats))
	at := t0.Add(time.Duration(r.Entity) * confSpacing)
	return chatRecord(ws, chatID, fmt.Sprintf("om_e%d", r.Entity), at, r.String())
}

func (d *conformanceDeployment) Message(t *testing.T, r conformance.Record) conformance.Message {
	ev := confEvidence(r)
	b, err := d.c.codecs.Evidence.Encode(context.Background(), ev)
	if err != nil {
		t.Fatalf("encode evidence %v: %v", r, err)
	}
	d.windows[confWindowKey(ids.ChatKey(ev.WorkspaceID, ev.ChatID), ids.WindowStart(ev.OccurredAt, confWindow))] = true
	d.labels[ev.ContentHash] = r.String()
	return conformance.Message{Key: ev.Key(), Value: b}
}

// Observe closes every window: it moves the clock past their grace, scans once,
// waits until the group table holds a closed marker for every window that
// received evidence and the group committed the loop records that closed them, and
// then reads the closed-window topic.
func (d *conformanceDeployment) Observe(t *testing.T) conformance.Observation {
	t.Helper()
	if d.running == nil {
		t.Fatal("Observe needs a running processor")
	}
	d.clock.Set(confObserveAt)
	if err := d.running.p.ScanOnce(context.Background()); err != nil {
		t.Fatalf("scan: %v", err)
	}
	testenv.EventuallyNil(t, conformance.WaitLimit, "every window closed", func() error {
		for key := range d.windows {
			if !windowClosed(d.running.p, key) {
				return fmt.Errorf("window %s not closed", key)
			}
		}
		return nil
	})
	conformance.CaughtUp(t, d.group(), d.Wiring().Consumed...)
	// A version 3 record names its evidence as an offset range of the chat's
	// partition: resolve it against the evidence topic the way the evidence table
	// does (the last version of each message in the range).
	type at struct {
		partition int32
		offset    int64
	}
	evidence := map[at]schemas.EvidenceRecord{}
	for _, r := range conformance.ReadAll(t, d.c.evidence) {
		ev, err := d.c.codecs.Evidence.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatalf("evidence record %d/%d: %v", r.Partition, r.Offset, err)
		}
		evidence[at{r.Partition, r.Offset}] = ev
	}
	var o conformance.Observation
	for _, r := range conformance.ReadAll(t, d.c.closed) {
		w, err := d.c.codecs.ClosedWindow.Decode(context.Background(), r.Value)
		if err != nil {
			t.Fatalf("closed-window record %d/%d: %v", r.Partition, r.Offset, err)
		}
		latest := map[string]schemas.EvidenceRecord{}
		for off := w.EvidenceLowOffset; off < w.EvidenceEndOffset; off++ {
			ev, ok := evidence[at{w.EvidencePartition, off}]
			if !ok || ids.ChatKey(ev.WorkspaceID, ev.ChatID) != w.Key() ||
				ev.OccurredAt.Before(w.WindowStart) || !ev.OccurredAt.Before(w.WindowEnd) {
				continue
			}
			latest[ev.Key()] = ev // ascending offsets: the last version wins
		}
		var held []schemas.EvidenceRecord
		for _, ev := range latest {
			held = append(held, ev)
		}
		o = append(o, d.render(string(r.Key), w, held, d.labelOf))
	}
	return o
}

// windowClosed reports whether the processor's table holds key's window as closed.
func windowClosed(p *Processor, key string) bool {
	chatKey, start, ok := splitConfWindowKey(key)
	if !ok {
		return false
	}
	v, err := p.Goka().Get(chatKey)
	if err != nil || v == nil {
		return false
	}
	c, ok := v.(*chatValue)
	return ok && c.isClosed(p.mach.index(start.UnixMilli()))
}

// confWindowKey names a window of a chat in the adapter's bookkeeping.
func confWindowKey(chatKey string, start time.Time) string {
	return chatKey + "@" + start.UTC().Format(time.RFC3339)
}

func splitConfWindowKey(key string) (string, time.Time, bool) {
	i := strings.LastIndexByte(key, '@')
	if i < 0 {
		return "", time.Time{}, false
	}
	start, err := time.Parse(time.RFC3339, key[i+1:])
	return key[:i], start, err == nil
}

// Expect groups the last version of every message into its chat's window, closed at
// confObserveAt once its grace elapsed.
func (d *conformanceDeployment) Expect(records []conformance.Record) conformance.Observation {
	type window struct {
		chat  ids.ChatID
		start time.Time
	}
	held := map[window][]schemas.EvidenceRecord{}
	labels := map[string]string{}
	for _, r := range conformance.Latest(records) {
		ev := confEvidence(r)
		w := window{ev.ChatID, ids.WindowStart(ev.OccurredAt, confWindow)}
		held[w] = append(held[w], ev)
		labels[ev.ContentHash] = r.String()
	}
	var o conformance.Observation
	for w, evidence := range held {
		cw := schemas.ClosedWindow{
			WorkspaceID: ws, ChatID: w.chat, WindowStart: w.start, WindowEnd: w.start.Add(confWindow),
			ProcessorVersion: d.version, ClosedAt: confObserveAt, Reason: ReasonGraceElapsed,
		}
		o = append(o, d.render(cw.Key(), cw, evidence, func(h string) string { return labels[h] }))
	}
	return o
}

// render is one closed-window record with the evidence it resolves to, without its
// processor version (each deployment has its own), which it only checks.
func (d *conformanceDeployment) render(key string, w schemas.ClosedWindow, held []schemas.EvidenceRecord, label func(string) string) string {
	evidence := make([]string, len(held))
	for i, e := range held {
		evidence[i] = fmt.Sprintf("%s@%s=%s", e.Key(), e.OccurredAt.UTC().Format("15:04:05"), label(e.ContentHash))
	}
	sort.Strings(evidence)
	version := "own"
	if w.ProcessorVersion != d.version {
		version = w.ProcessorVersion
	}
	return fmt.Sprintf("closed key=%s window=%s+%s evidence=[%s] reason=%s closed_at=%s processor=%s",
		key, w.WindowStart.UTC().Format(time.RFC3339), w.WindowEnd.Sub(w.WindowStart),
		strings.Join(evidence, " "), w.Reason, w.ClosedAt.UTC().Format(time.RFC3339), version)
}

func (d *conformanceDeployment) labelOf(hash string) string {
	if l, ok := d.labels[hash]; ok {
		return l
	}
	return "?" + hash
}
