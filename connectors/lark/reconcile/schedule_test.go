package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	larkim "github.com/larksuite/oapi-sdk-go/v3/service/im/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// The scheduling of coverage passes (schedule.go), on fakes and a clock only Sleep
// moves: no broker, no database, no Lark.

func TestNextCoverage(t *testing.T) {
	const w, d = 10 * time.Minute, 6 * time.Second
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name      string
		now, last string
		end       string
	}{
		{"first: the next window end", "2026-01-01T10:03:00Z", "", "2026-01-01T10:10:00Z"},
		{"first, inside the delay of an end: that end, after the delay", "2026-01-01T10:10:03Z", "", "2026-01-01T10:10:00Z"},
		{"after a pass: the following end", "2026-01-01T10:10:09Z", "2026-01-01T10:10:00Z", "2026-01-01T10:20:00Z"},
		{"a pass that overran one end: that end, now", "2026-01-01T10:20:30Z", "2026-01-01T10:10:00Z", "2026-01-01T10:20:00Z"},
		{"a pass that overran several: the latest due end", "2026-01-01T10:45:00Z", "2026-01-01T10:10:00Z", "2026-01-01T10:40:00Z"},
		{"the next end's delay not passed yet", "2026-01-01T10:20:05Z", "2026-01-01T10:10:00Z", "2026-01-01T10:20:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var last time.Time
			if tt.last != "" {
				last = at(tt.last)
			}
			end, due := nextCoverage(at(tt.now), last, w, d)
			if !end.Equal(at(tt.end)) || !due.Equal(end.Add(d)) {
				t.Fatalf("nextCoverage = %s (due %s), want %s (due +%s)", end, due, tt.end, d)
			}
		})
	}
}

// TestSlotsKeepASlotBetweenCoverageAcquires: a coverage pass asks for its runs' slots
// one after another; a slot freed between two of its acquires goes to its next run,
// not to a scheduled run that came later (the share still holds), and a pass that
// stops asking gives the kept slot back.
func TestSlotsKeepASlotBetweenCoverageAcquires(t *testing.T) {
	ctx := ctxTimeout(t)
	s := newSlots(1)
	s.announce(2)
	if err := s.acquire(ctx, stopSignal{}, classCoverage); err != nil {
		t.Fatal(err)
	}
	sched := make(chan error, 1)
	go func() { sched <- s.acquire(ctx, stopSignal{}, classScheduled) }()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.waiting[classScheduled]) == 1
	})
	s.release() // the pass's first run ends before it asked for its second slot
	s.mu.Lock()
	free, schedGranted := s.free, s.granted[classScheduled]
	s.mu.Unlock()
	if free != 1 || schedGranted != 0 {
		t.Fatalf("after the release: %d free, %d scheduled grants; want the slot kept for the announced coverage run", free, schedGranted)
	}
	if err := s.acquire(ctx, stopSignal{}, classCoverage); err != nil { // takes the kept slot at once
		t.Fatal(err)
	}
	s.announce(1) // a second pass announces a run, then stops before asking
	s.release()
	s.announce(-1)
	select {
	case err := <-sched:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the scheduled run never got the slot the stopped pass gave back")
	}
}

// TestSlotsCoverageFirstShare: with a coverage run and a scheduled run both waiting
// for the one slot, coverage gets coverageShare slots, then the scheduled run one.
func TestSlotsCoverageFirstShare(t *testing.T) {
	s := newSlots(1)
	ctx := ctxTimeout(t)
	if err := s.acquire(ctx, stopSignal{}, classScheduled); err != nil {
		t.Fatal(err)
	}
	got := make(chan int)
	loop := func(class, n int) {
		for range n {
			if err := s.acquire(ctx, stopSignal{}, class); err != nil {
				return
			}
			got <- class
		}
	}
	go loop(classCoverage, 1000)
	go loop(classScheduled, 100)
	var order []int
	for len(order) < 1100 {
		// both classes wait (while either has runs left) before the slot is given back
		waitFor(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			cov, sch := count(order, classCoverage) < 1000, count(order, classScheduled) < 100
			return (!cov || len(s.waiting[classCoverage]) == 1) && (!sch || len(s.waiting[classScheduled]) == 1)
		})
		s.release()
		order = append(order, <-got)
	}
	// coverage first, then one scheduled run per coverageShare coverage runs
	for i := range 400 {
		want := classCoverage
		if i%(coverageShare+1) == coverageShare {
			want = classScheduled
		}
		if order[i] != want {
			t.Fatalf("grant %d went to class %d, want %d (order %v)", i, order[i], want, order[:i+1])
		}
	}
	if n := count(order[:400], classScheduled); n != 100 {
		t.Fatalf("the scheduled runs got %d of the first 400 slots, want all 100 (not starved)", n)
	}
}

func count(xs []int, v int) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds (bounded by waitBound, which only keeps a broken
// test from hanging).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		runtime.Gosched()
	}
}

// TestCoveragePassUnderLoad: 1,000 chats with evidence in the window that just ended
// and 100 older chats whose checkpoints lag: the coverage pass reads the active chats
// first, the interval pass started with it still reads every older chat long before
// the coverage pass ends, a chat with an endless history uses exactly its page budget,
// and no second of the clock holds more history calls than the rate plus the burst.
func TestCoveragePassUnderLoad(t *testing.T) {
	const (
		active, older = 1000, 100
		rate, burst   = 50, 5
		budget        = 7
	)
	window := time.Minute
	end := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	ft := testenv.NewClock(end.Add(6 * time.Second))
	f := newFakes(t, ft, end)
	for i := range older {
		f.addChat(fmt.Sprintf("oc_old%04d", i), false, end.Add(-30*time.Minute))
	}
	for i := range active {
		f.addChat(fmt.Sprintf("oc_act%04d", i), true, end.Add(-window))
	}
	endless := ids.ChatID("oc_act0500")
	f.hist.endless[endless] = true

	reg := prometheus.NewRegistry()
	opts := f.options(ft)
	opts.Registry = reg
	opts.RequestsPerSecond, opts.Burst = rate, burst
	opts.MaxConcurrentChats = 2
	opts.MaxPagesPerRun = budget
	opts.MaxThreadsPerChat = 1
	// The interval is longer than the passes take on this clock (Sleep moves it once
	// per waiting run, so concurrent waits add up).
	opts.Window, opts.ReconcileInterval = window, 5*time.Minute
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })

	// Hold every slot until both passes wait, so that neither starts by accident.
	ctx := ctxTimeout(t)
	for range opts.MaxConcurrentChats {
		if err := r.slots.acquire(ctx, stopSignal{}, classScheduled); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var cov, sched PassReport
	var covErr, schedErr error
	wg.Add(2)
	go func() { defer wg.Done(); cov, covErr = r.coveragePass(ctx, stopSignal{}, end.Add(-window), end) }()
	waitFor(t, func() bool {
		r.slots.mu.Lock()
		defer r.slots.mu.Unlock()
		return len(r.slots.waiting[classCoverage]) == 1
	})
	go func() { defer wg.Done(); sched, schedErr = r.pass(ctx, stopSignal{}) }()
	waitFor(t, func() bool {
		r.slots.mu.Lock()
		defer r.slots.mu.Unlock()
		return len(r.slots.waiting[classScheduled]) == 1
	})
	// Give the slots back one at a time, each once both passes wait for one.
	for range opts.MaxConcurrentChats {
		waitFor(t, func() bool {
			r.slots.mu.Lock()
			defer r.slots.mu.Unlock()
			return len(r.slots.waiting[classCoverage]) == 1 && len(r.slots.waiting[classScheduled]) == 1
		})
		r.slots.release()
	}
	wg.Wait()
	if covErr != nil || schedErr != nil {
		t.Fatalf("passes: %v, %v", covErr, schedErr)
	}

	calls := f.hist.log()
	// Coverage first: the first calls are for active chats.
	for i, c := range calls[:opts.MaxConcurrentChats] {
		if !f.active[c.chat] {
			t.Fatalf("call %d was for %s, an inactive chat, before any coverage", i, c.chat)
		}
	}
	// Every active chat was covered by a run that reached the window's end.
	if len(cov.Chats) != active {
		t.Fatalf("the coverage pass read %d chats, want %d", len(cov.Chats), active)
	}
	for _, c := range cov.Chats {
		switch {
		case c.Chat == endless:
			if !errors.Is(c.Stopped, ErrPageBudget) || c.Pages != budget {
				t.Fatalf("endless chat: stopped %v after %d pages, want the page budget (%d)", c.Stopped, c.Pages, budget)
			}
		case c.Err != nil:
			t.Fatalf("coverage of %s failed: %v", c.Chat, c.Err)
		case c.Fresh:
			// the interval pass had read it after the window's end
		case !c.Complete || c.CoveredUntil.Before(end):
			t.Fatalf("coverage of %s: complete %v, covered until %s, want ≥ %s", c.Chat, c.Complete, c.CoveredUntil, end)
		}
	}
	// Not starved: the older chats were all read before 45% of the coverage calls.
	lastOld, covCalls := -1, 0
	for i, c := range calls {
		if !f.active[c.chat] {
			lastOld = i
		}
	}
	for _, c := range calls[:lastOld+1] {
		if f.active[c.chat] {
			covCalls++
		}
	}
	if n := len(f.hist.chatsRead(false)); n != older {
		t.Fatalf("the interval pass read %d of the %d older chats", n, older)
	}
	if total := len(calls) - older; covCalls > total*45/100 {
		t.Fatalf("the last older chat was read after %d of %d active-chat calls: starved behind the coverage pass", covCalls, total)
	}
	for _, c := range sched.Chats {
		if !f.active[c.Chat] && !c.Complete {
			t.Fatalf("older chat %s: %+v", c.Chat, c)
		}
	}
	// The rate limit: no second holds more than rate + burst calls (and the runs
	// that waited concurrently and are logged at the same instant of this clock).
	for i := range calls {
		j := i
		for j < len(calls) && calls[j].at.Sub(calls[i].at) < time.Second {
			j++
		}
		if j-i > rate+burst+opts.MaxConcurrentChats {
			t.Fatalf("%d history calls within one second from %s (limit %d/s, burst %d)", j-i, calls[i].at, rate, burst)
		}
	}
	// Each chat was read once: the interval pass left out what coverage had read.
	reads := map[ids.ChatID]int{}
	for _, c := range calls {
		reads[c.chat]++
	}
	for chat, n := range reads {
		if chat != endless && n != 1 {
			t.Fatalf("chat %s was read %d times, want once", chat, n)
		}
	}
	if got := testutil.ToFloat64(r.m.coveragePasses); got != 1 {
		t.Fatalf("coverage passes %v, want 1", got)
	}
	if n := testutil.CollectAndCount(reg, "larkline_reconcile_window_coverage_seconds"); n != 1 {
		t.Fatalf("window coverage histogram: %d series", n)
	}
}

// TestTruncatedRunContinues: a burst larger than a run's page budget is read by runs
// that follow each other at once (from the checkpoint, not re-reading the overlap),
// each within the budget, instead of one run per interval pass.
func TestTruncatedRunContinues(t *testing.T) {
	const msgs, pageSize, budget = 60, 5, 4
	end := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	ft := testenv.NewClock(end.Add(6 * time.Second))
	f := newFakes(t, ft, end)
	base := end.Add(-50 * time.Second)
	f.addChat("oc_burst0001", true, base.Add(-20*time.Minute))
	chat := ids.ChatID("oc_burst0001")
	for i := range msgs {
		f.hist.finite[chat] = append(f.hist.finite[chat], base.Add(time.Duration(i)*500*time.Millisecond))
	}
	opts := f.options(ft)
	opts.Registry = prometheus.NewRegistry()
	opts.RequestsPerSecond, opts.Burst = 50, 5
	opts.PageSize, opts.MaxPagesPerRun, opts.MaxThreadsPerChat = pageSize, budget, 1
	opts.Window, opts.ReconcileInterval = time.Minute, 5*time.Minute
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := ctxTimeout(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	r.setFollowing(true)
	go func() { defer close(done); r.continueRuns(ctx, stopSignal{c: stop}) }()
	t.Cleanup(func() { close(stop); <-done })

	rep, err := r.pass(ctx, stopSignal{})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Chats[0]; !errors.Is(c.Stopped, ErrPageBudget) || c.Pages != budget {
		t.Fatalf("first run: %+v, want %d pages and the budget", c, budget)
	}
	waitFor(t, func() bool {
		cp, _ := f.st.GetCheckpoint(ctx, f.ws[chat].ID, chat)
		return !cp.Position.Time.Before(end)
	})
	calls := f.hist.log()
	// 60 messages (two a second) in pages of 5, runs of 4 pages: messages 0–19, then
	// continuations from the checkpoint's second (Lark's start_time is whole seconds,
	// so each first page also holds the message before the checkpoint): 18–37, 36–55,
	// 54–59 in two pages. 14 calls; re-reading the overlap would cost more.
	if len(calls) != 14 {
		t.Fatalf("%d history calls, want 14 (no overlap re-read by continuations)", len(calls))
	}
	for i, c := range calls[budget:] {
		if c.start.Before(base) {
			t.Fatalf("call %d of a continuation starts at %s, in the overlap before the burst (%s)", budget+i, c.start, base)
		}
	}
	if n := testutil.ToFloat64(r.m.continuations); n != 3 {
		t.Fatalf("continuations %v, want 3", n)
	}
}

// TestIntervalPassLeavesOutCoveredChats: an interval pass makes no call for a chat a
// coverage run just read, and reads every other chat at every pass, as before.
func TestIntervalPassLeavesOutCoveredChats(t *testing.T) {
	end := time.Date(2026, 3, 1, 10, 5, 0, 0, time.UTC)
	ft := testenv.NewClock(end.Add(6 * time.Second))
	f := newFakes(t, ft, end)
	f.addChat("oc_act0001", true, end.Add(-time.Minute))
	f.addChat("oc_old0001", false, end.Add(-time.Hour))
	opts := f.options(ft)
	opts.Registry = prometheus.NewRegistry()
	opts.Window, opts.ReconcileInterval = time.Minute, 30*time.Second
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	ctx := ctxTimeout(t)
	if _, err := r.coveragePass(ctx, stopSignal{}, end.Add(-time.Minute), end); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ft.Sleep(ctx, 20*time.Second) // within the window: the coverage run is fresh
		if _, err := r.pass(ctx, stopSignal{}); err != nil {
			t.Fatal(err)
		}
	}
	reads := map[ids.ChatID]int{}
	for _, c := range f.hist.log() {
		reads[c.chat]++
	}
	if reads["oc_act0001"] != 1 || reads["oc_old0001"] != 2 {
		t.Fatalf("reads %v: want the covered chat once (its coverage run), the other at both passes", reads)
	}
	if n := testutil.ToFloat64(r.m.runs.WithLabelValues(string(KindIncremental), "fresh")); n != 2 {
		t.Fatalf("fresh runs %v, want 2", n)
	}
	// A window later the covered chat is no longer fresh.
	ft.Sleep(ctx, time.Minute)
	if _, err := r.pass(ctx, stopSignal{}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.hist.log()); n != 5 {
		t.Fatalf("%d calls after a pass a window later, want 5", n)
	}
}

// fakes are the reconciler's seams in memory.
type fakes struct {
	t      *testing.T
	ws     map[ids.ChatID]store.Workspace
	order  []ids.ChatID
	active map[ids.ChatID]bool
	hist   *fakeHistory
	st     *fakeStore
	end    time.Time
}

func newFakes(t *testing.T, ft *testenv.Clock, end time.Time) *fakes {
	f := &fakes{t: t, ws: map[ids.ChatID]store.Workspace{}, active: map[ids.ChatID]bool{}, end: end}
	f.hist = &fakeHistory{ft: ft, endless: map[ids.ChatID]bool{}, finite: map[ids.ChatID][]time.Time{}}
	f.st = &fakeStore{f: f, cps: map[string]store.Checkpoint{}}
	return f
}

// addChat binds chat to its own firing workspace with a checkpoint at cp (and a full
// scan just done, so that runs are incremental).
func (f *fakes) addChat(chat string, active bool, cp time.Time) {
	c := ids.ChatID(chat)
	w := store.Workspace{ID: ids.WorkspaceID("ws-" + chat[3:]), Type: "incident", Status: store.WorkspaceFiring, CreatedAt: cp.Add(-time.Hour)}
	f.ws[c] = w
	f.order = append(f.order, c)
	f.active[c] = active
	scan := f.end
	f.st.cps[ids.ChatKey(w.ID, c)] = store.Checkpoint{Workspace: w.ID, Chat: c, Position: store.CheckpointPosition{Time: cp},
		Meta: store.CheckpointMeta{ReconcileVersion: ReconcileVersion, LastFullScanAt: &scan}}
}

func (f *fakes) options(ft *testenv.Clock) Options {
	codecs, err := schemas.NewCodecs(schemas.Topics{Evidence: "ev", Checkpoint: "cp"})
	if err != nil {
		f.t.Fatal(err)
	}
	norm, err := normalize.New(normalize.Options{SelfAppID: "cli_self", SelfBotOpenID: "ou_self"})
	if err != nil {
		f.t.Fatal(err)
	}
	return Options{
		Store: f.st, Eligibility: fakeEligibility{f}, Chats: fakeGuard{}, History: f.hist, Normalizer: norm,
		Producer: &fakeProducer{}, EvidenceCodec: codecs.Evidence, CheckpointCodec: codecs.Checkpoint,
		EvidenceTopic: "ev", CheckpointTopic: "cp", Clock: ft.Now, Sleep: ft.Sleep, Jitter: func() float64 { return 0 },
	}
}

type fakeEligibility struct{ f *fakes }

func (e fakeEligibility) Resolve(_ context.Context, chat ids.ChatID, _ time.Time) (bindings.Resolution, error) {
	w := e.f.ws[chat]
	return bindings.Resolution{Chat: chat, Targets: []bindings.Target{{Workspace: w.ID, Type: w.Type, CreatedAt: w.CreatedAt}}}, nil
}

type fakeGuard struct{}

func (fakeGuard) Check(context.Context, ids.ChatID, string) error { return nil }

type fakeProducer struct {
	mu     sync.Mutex
	offset int64
}

func (p *fakeProducer) ProduceSync(_ context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(kgo.ProduceResults, len(rs))
	for i, r := range rs {
		r.Offset = p.offset
		p.offset++
		out[i] = kgo.ProduceResult{Record: r}
	}
	return out
}

// fakeHistory answers every chat with an empty page, and an endless chat with empty
// pages that always have more; it logs each call with the clock's time.
type fakeHistory struct {
	ft      *testenv.Clock
	endless map[ids.ChatID]bool
	// finite chats show text messages created at these times, oldest first.
	finite map[ids.ChatID][]time.Time
	mu     sync.Mutex
	calls  []fakeCall
}

type fakeCall struct {
	chat  ids.ChatID
	at    time.Time
	start time.Time
}

func (h *fakeHistory) ListMessages(_ context.Context, q larkapi.ListQuery) (larkapi.ListPage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	chat := ids.ChatID(q.ContainerID)
	h.calls = append(h.calls, fakeCall{chat: chat, at: h.ft.Now(), start: q.Start})
	if h.endless[chat] {
		return larkapi.ListPage{HasMore: true, PageToken: fmt.Sprint("p", len(h.calls))}, nil
	}
	var in []*larkim.Message
	for i, at := range h.finite[chat] {
		if at.Unix() >= q.Start.Unix() && at.Unix() < q.End.Unix() {
			in = append(in, textMessage(chat, i, at))
		}
	}
	from := 0
	if q.PageToken != "" {
		from, _ = strconv.Atoi(q.PageToken)
	}
	to := min(from+q.PageSize, len(in))
	page := larkapi.ListPage{Items: in[from:to]}
	if to < len(in) {
		page.HasMore, page.PageToken = true, strconv.Itoa(to)
	}
	return page, nil
}

func textMessage(chat ids.ChatID, i int, at time.Time) *larkim.Message {
	str := func(s string) *string { return &s }
	return &larkim.Message{
		MessageId: str(fmt.Sprintf("om_c%04d", i)), ChatId: str(string(chat)), MsgType: str("text"),
		CreateTime: str(strconv.FormatInt(at.UnixMilli(), 10)), UpdateTime: str(strconv.FormatInt(at.UnixMilli(), 10)),
		Body:   &larkim.MessageBody{Content: str(`{"text":"status update"}`)},
		Sender: &larkim.Sender{Id: str("ou_user1"), IdType: str("open_id"), SenderType: str("user")},
	}
}

func (h *fakeHistory) log() []fakeCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// chatsRead returns the chats read, active ones or the others.
func (h *fakeHistory) chatsRead(active bool) map[ids.ChatID]bool {
	out := map[ids.ChatID]bool{}
	for _, c := range h.log() {
		if (c.chat[3:6] == "act") == active {
			out[c.chat] = true
		}
	}
	return out
}

// fakeStore holds checkpoints in memory; the evidence table has the active chats'
// window.
type fakeStore struct {
	f   *fakes
	mu  sync.Mutex
	cps map[string]store.Checkpoint
}

func (s *fakeStore) GetCheckpoint(_ context.Context, ws ids.WorkspaceID, chat ids.ChatID) (store.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp, ok := s.cps[ids.ChatKey(ws, chat)]
	if !ok {
		return store.Checkpoint{}, store.ErrNotFound
	}
	return cp, nil
}

func (s *fakeStore) AdvanceCheckpoint(_ context.Context, ws ids.WorkspaceID, chat ids.ChatID, pos store.CheckpointPosition, meta store.CheckpointMeta) (store.Checkpoint, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ids.ChatKey(ws, chat)
	cp := s.cps[k]
	if pos.Compare(cp.Position) < 0 {
		return cp, false, nil
	}
	advanced := pos.Compare(cp.Position) > 0
	cp.Workspace, cp.Chat, cp.Position, cp.Meta = ws, chat, pos, meta
	s.cps[k] = cp
	return cp, advanced, nil
}

func (s *fakeStore) ListBindings(context.Context, store.BindingFilter) ([]store.WorkspaceBinding, error) {
	out := make([]store.WorkspaceBinding, 0, len(s.f.order))
	for _, c := range s.f.order {
		out = append(out, store.WorkspaceBinding{Chat: c, Workspace: s.f.ws[c]})
	}
	return out, nil
}

func (s *fakeStore) GetWorkspace(context.Context, ids.WorkspaceID) (store.Workspace, error) {
	return store.Workspace{}, store.ErrNotFound
}

func (s *fakeStore) ChatsOfWorkspace(context.Context, ids.WorkspaceID) ([]ids.ChatID, error) {
	return nil, nil
}

func (s *fakeStore) EvidenceByKeys(context.Context, ids.WorkspaceID, store.EvidenceKind, []string) ([]store.Evidence, error) {
	return nil, nil
}

func (s *fakeStore) WorkspacesHoldingMessage(context.Context, ids.ChatID, ids.MessageID) ([]ids.WorkspaceID, error) {
	return nil, nil
}

func (s *fakeStore) EvidenceInRange(context.Context, store.RangeQuery) (store.EvidencePage, error) {
	return store.EvidencePage{}, nil
}

func (s *fakeStore) ChatsWithEvidence(_ context.Context, chats []store.ChatRef, from, to time.Time) ([]store.ChatRef, error) {
	if !from.Equal(s.f.end.Add(-time.Minute)) || !to.Equal(s.f.end) {
		return nil, fmt.Errorf("asked for [%s, %s), want the window that just ended", from, to)
	}
	var out []store.ChatRef
	for _, c := range chats {
		if s.f.active[c.Chat] {
			out = append(out, c)
		}
	}
	// Newest first, the other way round from the interval pass: the two meet, and
	// each must leave out what the other read after the window's end.
	slices.Reverse(out)
	return out, nil
}
