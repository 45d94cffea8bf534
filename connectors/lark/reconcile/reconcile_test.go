package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// oneChat returns the only chat report of a pass.
func oneChat(t testing.TB, rep PassReport) ChatReport {
	t.Helper()
	if len(rep.Chats) != 1 {
		t.Fatalf("pass reconciled %d chats, want 1: %+v", len(rep.Chats), rep.Chats)
	}
	return rep.Chats[0]
}

func chatCalls(calls []listCall) (chat, thread []listCall) {
	for _, c := range calls {
		if c.container == larkapi.ContainerChat {
			chat = append(chat, c)
		} else {
			thread = append(thread, c)
		}
	}
	return chat, thread
}

// TestBackfillFollowsEveryPage: the first run of a chat reads from the
// workspace's creation to now, oldest first, through every page and into the
// thread container, produces every message once (the ones the webhook path
// dropped included), nothing from before the workspace, and leaves a checkpoint
// covering the range, in Postgres and on the checkpoint topic. The next run only
// re-reads the overlap.
func TestBackfillFollowsEveryPage(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-bf")
		chat = ids.ChatID("oc_bf")
	)
	e, created := newIncident(t, ws, chat, 2*time.Hour)
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("bf", 900), Chat: chat, At: created.Add(-time.Minute)}, "before the incident")
	dropped := map[ids.MessageID]bool{}
	for i := range 22 {
		d := larktest.DeliverOnce
		if i%3 == 0 {
			d = larktest.DeliverDrop
			dropped[msgID("bf", i)] = true
		}
		e.lark.say(t, d, larktest.Msg{ID: msgID("bf", i), Chat: chat, At: created.Add(time.Duration(i+1) * 4 * time.Minute)}, "status update")
	}
	root := msgID("bf", 5)
	for k := range 3 {
		e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("bfr", k), Chat: chat, At: created.Add(time.Duration(25+k) * time.Minute),
			RootID: root, ParentID: root, ThreadID: "omt_bf1"}, "in thread")
	}

	r := e.reconciler(t, e.options(t))
	ctx := ctxTimeout(t)
	c := runOne(t, ctx, r)
	if c.Err != nil || !c.Complete || c.Kind != KindBackfill {
		t.Fatalf("run: %+v", c)
	}
	if c.Pages != 5 || c.ThreadPages != 1 || c.Threads != 1 || c.Messages != 25 || c.Produced != 25 {
		t.Fatalf("pages %d thread pages %d threads %d messages %d produced %d, want 5 1 1 25 25", c.Pages, c.ThreadPages, c.Threads, c.Messages, c.Produced)
	}

	recs := e.evidence(t)
	got := byMessage(recs)
	if len(recs) != 25 || len(got) != 25 {
		t.Fatalf("%d records for %d messages, want 25 distinct", len(recs), len(got))
	}
	if _, ok := got[msgID("bf", 900)]; ok {
		t.Fatal("a message older than the workspace was produced")
	}
	for id := range dropped {
		if _, ok := got[id]; !ok {
			t.Fatalf("dropped message %s not recovered", id)
		}
	}
	for _, rec := range recs {
		if rec.WorkspaceID != ws || rec.IngestPath != schemas.IngestReconcile || rec.OccurredAt.Before(created.Truncate(time.Millisecond)) {
			t.Fatalf("record %s: workspace %s path %s occurred %s", rec.MessageID, rec.WorkspaceID, rec.IngestPath, rec.OccurredAt)
		}
	}
	if rep := got[msgID("bfr", 1)][0]; rep.ThreadID != "omt_bf1" || rep.RootID != root {
		t.Fatalf("thread reply: thread %q root %q", rep.ThreadID, rep.RootID)
	}

	chatQ, threadQ := chatCalls(e.lark.calls())
	if len(chatQ) != 5 || len(threadQ) != 1 {
		t.Fatalf("%d chat and %d thread requests, want 5 and 1", len(chatQ), len(threadQ))
	}
	for i, q := range chatQ {
		if q.start == nil || *q.start != sec(created) || q.end == nil || *q.end != sec(c.End) || q.sort != "ByCreateTimeAsc" || q.pageSize != 5 {
			t.Fatalf("chat request %d: %+v (start must be the workspace's creation second)", i, q)
		}
		if (i == 0) != (q.token == "") {
			t.Fatalf("chat request %d has page token %q", i, q.token)
		}
	}
	if q := threadQ[0]; q.id != "omt_bf1" || q.start != nil || q.end != nil || q.sort != "ByCreateTimeDesc" {
		t.Fatalf("thread request %+v: thread containers take no range and are read newest first", q)
	}

	cp, ok := e.checkpoint(t, ws, chat)
	if !ok || !cp.Position.Time.Equal(c.End) || cp.Position.MessageID != "" || cp.Meta.LastFullScanAt == nil || cp.Meta.ReconcileVersion != ReconcileVersion {
		t.Fatalf("checkpoint %+v, want covered through %s with a full scan", cp, c.End)
	}
	cov := e.coverage(t)[ids.ChatKey(ws, chat)]
	if !cov.CoveredUntil.Equal(c.End) || cov.CursorMessageID != "" {
		t.Fatalf("published coverage %+v, want %s", cov, c.End)
	}
	if n := len(testenv.ReadTopic(t, e.cpTopic)); n != 5 {
		t.Fatalf("%d checkpoints published, want one per page (5)", n)
	}
	if v := testutil.ToFloat64(r.m.apiCalls.WithLabelValues(larkapi.EndpointListMessages, outcomeOK)); v != 6 {
		t.Fatalf("api calls ok = %v, want 6", v)
	}

	// The next run is incremental: the overlap only, no quiet thread, nothing new.
	e.sinkAll(t)
	before := len(e.lark.calls())
	c2 := runOne(t, ctx, r)
	if c2.Err != nil || !c2.Complete || c2.Kind != KindIncremental || c2.Produced != 0 {
		t.Fatalf("incremental run: %+v", c2)
	}
	calls := e.lark.calls()[before:]
	if len(calls) != 1 || calls[0].start == nil || *calls[0].start != sec(cp.Position.Time.Add(-3*time.Minute)) {
		t.Fatalf("incremental requests %+v, want one from the checkpoint minus the overlap", calls)
	}
}

// TestDroppedEventRecovered runs the real webhook path first: delivered events
// become evidence through package ingest, dropped ones do not. Reconciliation then
// produces exactly the dropped ones; the delivered ones are already stored and are
// not produced again.
func TestDroppedEventRecovered(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-drop")
		chat = ids.ChatID("oc_drop")
	)
	e, created := newIncident(t, ws, chat, time.Hour)
	for i := range 6 {
		d := larktest.DeliverOnce
		if i == 2 || i == 4 {
			d = larktest.DeliverDrop
		}
		e.lark.say(t, d, larktest.Msg{ID: msgID("drop", i), Chat: chat, At: created.Add(time.Duration(i+1) * 5 * time.Minute)}, "update")
	}
	ctx := ctxTimeout(t)
	report := e.deliverWebhook(t, ctx)
	dropped := 0
	for _, d := range report.Deliveries {
		if d.Deliver == larktest.DeliverDrop && !d.Delivered {
			dropped++
		}
	}
	if dropped != 2 {
		t.Fatalf("%d events dropped by the webhook path, want 2", dropped)
	}
	if n := len(e.evidence(t)); n != 4 {
		t.Fatalf("webhook path produced %d records, want 4", n)
	}
	e.sinkAll(t)

	c := runOne(t, ctx, e.reconciler(t, e.options(t)))
	if c.Err != nil || !c.Complete || c.Produced != 2 || c.Unchanged != 4 {
		t.Fatalf("run: %+v, want 2 produced and 4 unchanged", c)
	}
	got := byMessage(e.evidence(t))
	for i := range 6 {
		versions := got[msgID("drop", i)]
		want := schemas.IngestEvent
		if i == 2 || i == 4 {
			want = schemas.IngestReconcile
		}
		if len(versions) != 1 || versions[0].IngestPath != want {
			t.Fatalf("message %d: %d versions (%+v), want one from %s", i, len(versions), versions, want)
		}
	}
}

// TestResumeAfterKill kills a backfill between two pages (the context is
// cancelled after the second committed page) and starts a new reconciler, as a
// restarted process would: it resumes from the checkpoint minus the overlap, loses
// nothing and reads nothing before the overlap again.
func TestResumeAfterKill(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-kill")
		chat = ids.ChatID("oc_kill")
	)
	e, created := newIncident(t, ws, chat, 50*time.Minute)
	times := map[ids.MessageID]time.Time{}
	for i := range 30 {
		id, at := msgID("kill", i), created.Add(time.Duration(i+1)*time.Minute+300*time.Millisecond).Truncate(time.Millisecond)
		times[id] = at
		e.lark.say(t, larktest.DeliverDrop, larktest.Msg{ID: id, Chat: chat, At: at}, "x")
	}

	killCtx, kill := context.WithCancel(ctxTimeout(t))
	opts := e.options(t)
	advances := 0
	opts.OnProgress = func(Progress) {
		if advances++; advances == 2 {
			kill()
		}
	}
	if c := runOne(t, killCtx, e.reconciler(t, opts)); c.Err == nil || failureReason(c.Err) != reasonCanceled || c.Pages != 2 {
		t.Fatalf("killed run: %+v", c)
	}
	cp, ok := e.checkpoint(t, ws, chat)
	if !ok || cp.Position.MessageID != msgID("kill", 9) || !cp.Position.Time.Equal(times[msgID("kill", 9)]) {
		t.Fatalf("checkpoint after the kill %+v, want the last message of page 2", cp)
	}
	if cov := e.coverage(t)[ids.ChatKey(ws, chat)]; !cov.CoveredUntil.Equal(cp.Position.Time) || cov.CursorMessageID != msgID("kill", 9) {
		t.Fatalf("published coverage %+v", cov)
	}
	killedCalls := len(e.lark.calls())

	c := runOne(t, ctxTimeout(t), e.reconciler(t, e.options(t)))
	if c.Err != nil || !c.Complete || c.Kind != KindBackfill {
		t.Fatalf("resumed run: %+v", c)
	}
	from := cp.Position.Time.Add(-3 * time.Minute)
	reread := 0
	for _, at := range times {
		if sec(at) >= sec(from) {
			reread++
		}
	}
	calls := e.lark.calls()[killedCalls:]
	wantPages := (reread + 4) / 5
	if len(calls) != wantPages {
		t.Fatalf("resumed run made %d requests, want %d for the %d messages from the checkpoint minus the overlap", len(calls), wantPages, reread)
	}
	for _, q := range calls {
		if q.start == nil || *q.start != sec(from) {
			t.Fatalf("resumed request %+v, want start_time %d (checkpoint − overlap)", q, sec(from))
		}
	}
	got := byMessage(e.evidence(t))
	for id, at := range times {
		versions := got[id]
		switch {
		case len(versions) == 0:
			t.Fatalf("message %s lost", id)
		case len(versions) > 1 && at.Before(from):
			t.Fatalf("message %s before the overlap produced %d times", id, len(versions))
		}
	}
	if cp, _ := e.checkpoint(t, ws, chat); !cp.Position.Time.Equal(c.End) || cp.Meta.LastFullScanAt == nil {
		t.Fatalf("final checkpoint %+v", cp)
	}
}

// TestFailedPageKeepsCheckpoint: Lark fails the second page beyond the retry
// budget; the checkpoint stays at the first page (with diagnostics), coverage is
// not published past it, and the next run completes.
func TestFailedPageKeepsCheckpoint(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-fp")
		chat = ids.ChatID("oc_fp")
	)
	e, created := newIncident(t, ws, chat, time.Hour)
	e.lark.sayEvery(t, larktest.DeliverOnce, chat, "fp", 12, created, 3*time.Minute, "x")
	opts := e.options(t)
	opts.MaxRetries = new(2)
	sl := testenv.NewClock(time.Now())
	opts.Sleep = sl.Sleep
	var once sync.Once
	opts.OnProgress = func(Progress) {
		once.Do(func() {
			if err := e.lark.srv.FailNext(larktest.PathListMessages, 3, larktest.FaultHTTP500()); err != nil {
				t.Error(err)
			}
		})
	}
	r := e.reconciler(t, opts)
	c := runOne(t, ctxTimeout(t), r)
	if c.Err == nil || failureReason(c.Err) != reasonLarkUnavailable || c.Pages != 1 || !IsRetryable(c.Err) {
		t.Fatalf("run: %+v", c)
	}
	cp, ok := e.checkpoint(t, ws, chat)
	if !ok || cp.Position.MessageID != msgID("fp", 4) || !strings.Contains(cp.Meta.Error, reasonLarkUnavailable) {
		t.Fatalf("checkpoint %+v, want page 1's last message and the failure's diagnostics", cp)
	}
	if cov := e.coverage(t)[ids.ChatKey(ws, chat)]; !cov.CoveredUntil.Equal(cp.Position.Time) {
		t.Fatalf("coverage %s published past the checkpoint %s", cov.CoveredUntil, cp.Position.Time)
	}
	if n := len(sl.Sleeps()); n != 2 {
		t.Fatalf("%d backoffs, want 2 (MaxRetries)", n)
	}
	if v := testutil.ToFloat64(r.m.failures.WithLabelValues(reasonLarkUnavailable)); v != 1 {
		t.Fatalf("failures{lark_unavailable} = %v", v)
	}

	if c := runOne(t, ctxTimeout(t), r); c.Err != nil || !c.Complete {
		t.Fatalf("next run: %+v", c)
	}
	if cp, _ := e.checkpoint(t, ws, chat); cp.Meta.Error != "" || cp.Position.MessageID != "" {
		t.Fatalf("checkpoint after recovery %+v", cp)
	}
	if n := len(byMessage(e.evidence(t))); n != 12 {
		t.Fatalf("%d messages produced, want 12", n)
	}
}

// failingProducer fails every record of its fail-th ProduceSync call to topic,
// and passes everything else to the real client.
type failingProducer struct {
	evidence.Producer
	topic string
	fail  int

	mu    sync.Mutex
	calls int
}

var errInjected = errors.New("injected produce failure")

func (p *failingProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	if len(rs) > 0 && rs[0].Topic == p.topic {
		p.mu.Lock()
		p.calls++
		n := p.calls
		p.mu.Unlock()
		if n == p.fail {
			out := make(kgo.ProduceResults, len(rs))
			for i, r := range rs {
				out[i] = kgo.ProduceResult{Record: r, Err: errInjected}
			}
			return out
		}
	}
	return p.Producer.ProduceSync(ctx, rs...)
}

// TestFailedProduceKeepsCheckpoint: when Kafka does not acknowledge a batch, the
// checkpoint stays where the last acknowledged batch left it.
func TestFailedProduceKeepsCheckpoint(t *testing.T) {
	t.Run("second batch not acknowledged", func(t *testing.T) {
		const (
			ws   = ids.WorkspaceID("ws-fk")
			chat = ids.ChatID("oc_fk")
		)
		e, created := newIncident(t, ws, chat, time.Hour)
		e.lark.sayEvery(t, larktest.DeliverOnce, chat, "fk", 12, created, 3*time.Minute, "x")
		opts := e.options(t)
		opts.Producer = &failingProducer{Producer: e.prod, topic: e.evTopic, fail: 2}
		c := runOne(t, ctxTimeout(t), e.reconciler(t, opts))
		if !errors.Is(c.Err, errInjected) || failureReason(c.Err) != reasonKafka || c.Produced != 5 {
			t.Fatalf("run: %+v", c)
		}
		if cp, ok := e.checkpoint(t, ws, chat); !ok || cp.Position.MessageID != msgID("fk", 4) {
			t.Fatalf("checkpoint %+v, want page 1's last message", cp)
		}
		if n := len(testenv.ReadTopic(t, e.cpTopic)); n != 1 {
			t.Fatalf("%d checkpoints published, want 1", n)
		}
	})
	t.Run("broker refuses every record", func(t *testing.T) {
		const (
			ws   = ids.WorkspaceID("ws-big")
			chat = ids.ChatID("oc_big")
		)
		e := newEnv(t, chat)
		tiny := "64"
		small := testenv.NewTopic(t, 3, map[string]*string{"max.message.bytes": &tiny})
		created := time.Now().Add(-time.Hour)
		e.workspace(t, ws, "incident", store.WorkspaceFiring, created, chat)
		e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("big", 0), Chat: chat, At: created.Add(time.Minute)}, "x")
		opts := e.options(t)
		opts.EvidenceTopic = small
		c := runOne(t, ctxTimeout(t), e.reconciler(t, opts))
		if c.Err == nil || failureReason(c.Err) != reasonKafka || IsRetryable(c.Err) {
			t.Fatalf("run: %+v, want a non-retryable produce failure", c)
		}
		if cp, ok := e.checkpoint(t, ws, chat); ok {
			t.Fatalf("checkpoint %+v written though nothing was acknowledged", cp)
		}
		if n := len(testenv.ReadTopic(t, e.cpTopic)); n != 0 {
			t.Fatalf("%d checkpoints published", n)
		}
	})
}

// TestRefreshTurnsEditsAndRecallsIntoVersions: after a backfill (stored by the
// sink), an edit and a recall happen in Lark; the next refresh run produces a new
// version of each (a new content hash; the recall redacted) and nothing else.
func TestRefreshTurnsEditsAndRecallsIntoVersions(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-ed")
		chat = ids.ChatID("oc_ed")
	)
	e, created := newIncident(t, ws, chat, 3*time.Hour)
	e.lark.sayEvery(t, larktest.DeliverOnce, chat, "ed", 6, created, 10*time.Minute, "original text")
	ctx := ctxTimeout(t)
	if c := runOne(t, ctx, e.reconciler(t, e.options(t))); c.Produced != 6 {
		t.Fatalf("backfill: %+v", c)
	}
	e.sinkAll(t)
	original := byMessage(e.evidence(t))

	now := time.Now()
	if err := e.lark.srv.AddEdit(larktest.Edit{MessageID: msgID("ed", 1), UpdateTime: now.Add(-2 * time.Minute), Content: `{"text":"corrected text"}`}); err != nil {
		t.Fatal(err)
	}
	if err := e.lark.srv.AddEvent(larktest.DeliverDrop, e.lark.builder.Recall(msgID("ed", 3), chat, now.Add(-time.Minute), "")); err != nil {
		t.Fatal(err)
	}

	opts := e.options(t)
	opts.EvidenceRefreshInterval = time.Nanosecond // due at once
	c := runOne(t, ctx, e.reconciler(t, opts))
	if c.Err != nil || c.Kind != KindRefresh || c.Produced != 2 || c.Unchanged != 4 {
		t.Fatalf("refresh run: %+v, want 2 produced and 4 unchanged", c)
	}
	got := byMessage(e.evidence(t))
	edited := got[msgID("ed", 1)]
	if len(edited) != 2 {
		t.Fatalf("edited message has %d versions", len(edited))
	}
	if v := edited[1]; v.IngestPath != schemas.IngestRefresh || v.Content != "corrected text" || v.ContentHash == original[msgID("ed", 1)][0].ContentHash ||
		!strings.Contains(v.MetadataJSON, `"edited":true`) {
		t.Fatalf("edit version %+v", v)
	}
	recalled := got[msgID("ed", 3)]
	if len(recalled) != 2 {
		t.Fatalf("recalled message has %d versions", len(recalled))
	}
	if v := recalled[1]; v.IngestPath != schemas.IngestRefresh || !v.Deleted || v.Content != "" || v.SynthesisEligible ||
		v.ContentHash == original[msgID("ed", 3)][0].ContentHash {
		t.Fatalf("recall version %+v, want redacted", v)
	}
	for _, i := range []int{0, 2, 4, 5} {
		if n := len(got[msgID("ed", i)]); n != 1 {
			t.Fatalf("unchanged message %d produced %d times", i, n)
		}
	}
}

// TestRateLimitSlowsWithoutLoss: two rate-limit answers (HTTP 429, code 99991400,
// x-ogw-ratelimit-reset 7) make the scanner wait at least 7 s each (observed
// through the injected sleeper), and the run still collects everything.
func TestRateLimitSlowsWithoutLoss(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-rl")
		chat = ids.ChatID("oc_rl")
	)
	e, created := newIncident(t, ws, chat, time.Hour)
	e.lark.sayEvery(t, larktest.DeliverOnce, chat, "rl", 12, created, 3*time.Minute, "x")
	if err := e.lark.srv.FailNext(larktest.PathListMessages, 2, larktest.FaultRateLimit(7)); err != nil {
		t.Fatal(err)
	}
	opts := e.options(t)
	// A clock that only the injected sleeper moves: the waits are observed exactly.
	ft := testenv.NewClock(time.Now())
	opts.Clock, opts.Sleep = ft.Now, ft.Sleep
	r := e.reconciler(t, opts)
	c := runOne(t, ctxTimeout(t), r)
	if c.Err != nil || !c.Complete || c.Produced != 12 {
		t.Fatalf("run: %+v", c)
	}
	long := 0
	for _, d := range ft.Sleeps() {
		if d >= 7*time.Second {
			long++
		}
	}
	if long != 2 {
		t.Fatalf("waits %v, want two of at least x-ogw-ratelimit-reset (7s)", ft.Sleeps())
	}
	if v := testutil.ToFloat64(r.m.apiCalls.WithLabelValues(larkapi.EndpointListMessages, outcomeRateLimited)); v != 2 {
		t.Fatalf("rate-limited calls = %v", v)
	}
	if v := testutil.ToFloat64(r.m.apiCalls.WithLabelValues(larkapi.EndpointListMessages, outcomeOK)); v != 3 {
		t.Fatalf("ok calls = %v, want 3 pages", v)
	}
	if n := len(byMessage(e.evidence(t))); n != 12 {
		t.Fatalf("%d messages, want 12", n)
	}
}

// TestLookbackBound: no request ever asks for history before
// max(workspace.created_at, now − 72h), for automatic and manual runs alike.
func TestLookbackBound(t *testing.T) {
	const (
		young = ids.WorkspaceID("ws-young")
		old   = ids.WorkspaceID("ws-old")
		chatY = ids.ChatID("oc_young")
		chatO = ids.ChatID("oc_old")
	)
	e := newEnv(t, chatY, chatO)
	now := time.Now()
	e.workspace(t, young, "incident", store.WorkspaceFiring, now.Add(-10*time.Hour), chatY)
	e.workspace(t, old, "incident", store.WorkspaceFiring, now.Add(-100*time.Hour), chatO)
	for i, at := range []time.Duration{-11 * time.Hour, -9 * time.Hour} {
		e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("y", i), Chat: chatY, At: now.Add(at)}, "x")
	}
	for i, at := range []time.Duration{-99 * time.Hour, -80 * time.Hour, -71 * time.Hour, -time.Hour} {
		e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("o", i), Chat: chatO, At: now.Add(at)}, "x")
	}
	r := e.reconciler(t, e.options(t))
	ctx := ctxTimeout(t)
	c := runOne(t, ctx, r) // the 100-hour-old workspace is not scanned automatically
	if c.Workspace != young || c.Produced != 1 {
		t.Fatalf("automatic run: %+v", c)
	}
	for _, q := range e.lark.calls() {
		if q.id != string(chatY) || q.start == nil || *q.start < sec(now.Add(-10*time.Hour)) {
			t.Fatalf("request %+v reads before the young workspace's creation", q)
		}
	}

	before := len(e.lark.calls())
	refreshTime := time.Now()
	ref, err := r.Refresh(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Chats) != 1 || ref.Chats[0].Produced != 2 {
		t.Fatalf("manual refresh: %+v", ref)
	}
	for _, q := range e.lark.calls()[before:] {
		if q.start == nil || *q.start < sec(refreshTime.Add(-72*time.Hour)) {
			t.Fatalf("manual request %+v reads before now − 72h", q)
		}
	}
	got := byMessage(e.evidence(t))
	for _, id := range []ids.MessageID{msgID("y", 0), msgID("o", 0), msgID("o", 1)} {
		if _, ok := got[id]; ok {
			t.Fatalf("message %s outside the bound was produced", id)
		}
	}
}

// TestManualRefresh: a workspace that is no longer firing is not scanned
// automatically, but Refresh reconciles it (IngestPath manual); unknown and
// disabled workspaces are refused with typed errors.
func TestManualRefresh(t *testing.T) {
	const (
		ws    = ids.WorkspaceID("ws-rec")
		drill = ids.WorkspaceID("ws-drill")
		chat  = ids.ChatID("oc_rec")
		chatD = ids.ChatID("oc_drill")
	)
	e := newEnv(t, chat, chatD)
	created := time.Now().Add(-5 * time.Hour)
	e.workspace(t, ws, "incident", store.WorkspaceRecovered, created, chat)
	e.workspace(t, drill, "drill", store.WorkspaceFiring, created, chatD)
	e.lark.sayEvery(t, larktest.DeliverDrop, chat, "rec", 7, created, 20*time.Minute, "x")
	r := e.reconciler(t, e.options(t))
	ctx := ctxTimeout(t)
	rep, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Chats) != 1 || rep.Chats[0].Workspace != drill || rep.Chats[0].Stopped != ErrIneligible || rep.Chats[0].Pages != 0 {
		t.Fatalf("automatic pass %+v: the recovered workspace must not be listed, the drill stopped before any page", rep.Chats)
	}
	if n := len(e.lark.calls()); n != 0 {
		t.Fatalf("%d requests for ineligible workspaces", n)
	}

	ref, err := r.Refresh(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Chats) != 1 || !ref.Chats[0].Complete || ref.Chats[0].Produced != 7 || ref.Chats[0].Kind != KindManual {
		t.Fatalf("refresh: %+v", ref)
	}
	for _, rec := range e.evidence(t) {
		if rec.IngestPath != schemas.IngestManual {
			t.Fatalf("record %s has path %s", rec.MessageID, rec.IngestPath)
		}
	}
	if cov := e.coverage(t)[ids.ChatKey(ws, chat)]; !cov.CoveredUntil.Equal(ref.Chats[0].End) {
		t.Fatalf("coverage %+v", cov)
	}

	if _, err := r.Refresh(ctx, "ws-missing"); !errors.Is(err, ErrUnknownWorkspace) || IsRetryable(err) {
		t.Fatalf("unknown workspace: %v", err)
	}
	if _, err := r.Refresh(ctx, drill); !errors.Is(err, ErrNotEnabled) || IsRetryable(err) {
		t.Fatalf("disabled type: %v", err)
	}
	if _, err := r.Refresh(ctx, "bad/id"); !errors.Is(err, ids.ErrInvalidID) {
		t.Fatalf("invalid id: %v", err)
	}
}

// TestLeavingFiringStopsScan: the workspace recovers while its first chat is being
// read: that run stops before its next page, and the queued run of its second chat
// (one slot only) never calls Lark.
func TestLeavingFiringStopsScan(t *testing.T) {
	const (
		ws    = ids.WorkspaceID("ws-leave")
		chatA = ids.ChatID("oc_leave_a")
		chatB = ids.ChatID("oc_leave_b")
	)
	e := newEnv(t, chatA, chatB)
	created := time.Now().Add(-time.Hour)
	e.workspace(t, ws, "incident", store.WorkspaceFiring, created, chatA, chatB)
	for i := range 12 {
		for _, c := range []ids.ChatID{chatA, chatB} {
			e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID(string(c[3:]), i), Chat: c, At: created.Add(time.Duration(i+1) * 3 * time.Minute)}, "x")
		}
	}
	opts := e.options(t)
	opts.MaxConcurrentChats = 1
	opts.OnProgress = func(p Progress) {
		if p.Chat == chatA && p.Pages == 1 {
			if _, err := e.st.SetWorkspaceStatus(context.Background(), ws, store.WorkspaceRecovered); err != nil {
				t.Error(err)
			}
		}
	}
	rep, err := e.reconciler(t, opts).RunOnce(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Chats) != 2 {
		t.Fatalf("pass: %+v", rep.Chats)
	}
	a, b := rep.Chats[0], rep.Chats[1]
	if a.Chat != chatA || !errors.Is(a.Stopped, ErrIneligible) || a.Pages != 1 || a.Err != nil {
		t.Fatalf("chat A: %+v", a)
	}
	if b.Chat != chatB || !errors.Is(b.Stopped, ErrIneligible) || b.Pages != 0 {
		t.Fatalf("queued chat B: %+v", b)
	}
	calls := e.lark.calls()
	if len(calls) != 1 || calls[0].id != string(chatA) {
		t.Fatalf("requests %+v, want chat A's first page only", calls)
	}
	if cp, ok := e.checkpoint(t, ws, chatA); !ok || cp.Position.MessageID != msgID("leave_a", 4) {
		t.Fatalf("checkpoint %+v", cp)
	}
}

// TestThreadReplyToOlderRoot: a reply to a thread whose root lies before the
// incremental range is visible only in the thread container; a new reconciler (a
// restarted process) finds the thread in the stored evidence and collects it.
func TestThreadReplyToOlderRoot(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-th")
		chat = ids.ChatID("oc_th")
	)
	e := newEnv(t, chat)
	now := time.Now()
	created := now.Add(-2 * time.Hour)
	e.workspace(t, ws, "incident", store.WorkspaceFiring, created, chat)
	root := msgID("th", 0)
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: root, Chat: chat, At: now.Add(-90 * time.Minute)}, "root")
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("th", 1), Chat: chat, At: now.Add(-20 * time.Minute), RootID: root, ParentID: root, ThreadID: "omt_th"}, "reply")
	ctx := ctxTimeout(t)
	if c := runOne(t, ctx, e.reconciler(t, e.options(t))); c.Produced != 2 {
		t.Fatalf("backfill: %+v", c)
	}
	e.sinkAll(t)

	late := msgID("th", 2)
	e.lark.say(t, larktest.DeliverDrop, larktest.Msg{ID: late, Chat: chat, At: time.Now().Add(-2 * time.Second), RootID: root, ParentID: root, ThreadID: "omt_th"}, "late reply")
	before := len(e.lark.calls())
	c := runOne(t, ctx, e.reconciler(t, e.options(t)))
	if c.Err != nil || c.Kind != KindIncremental || c.Produced != 1 || c.Threads != 1 {
		t.Fatalf("incremental run: %+v", c)
	}
	if _, ok := byMessage(e.evidence(t))[late]; !ok {
		t.Fatal("late reply not collected")
	}
	_, threadQ := chatCalls(e.lark.calls()[before:])
	if len(threadQ) != 1 || threadQ[0].id != "omt_th" {
		t.Fatalf("thread requests %+v", threadQ)
	}
}

// TestRunDrains: Run reconciles at once; when its context ends in the middle of
// a backfill, the chat run finishes the page batch it is on, stops before the
// next page, and Run returns nil. A second Run meanwhile is refused.
func TestRunDrains(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-run")
		chat = ids.ChatID("oc_run")
	)
	e, created := newIncident(t, ws, chat, time.Hour)
	e.lark.sayEvery(t, larktest.DeliverOnce, chat, "run", 12, created, 4*time.Minute, "x")
	opts := e.options(t)
	ctx, cancel := context.WithCancel(ctxTimeout(t))
	firstPage := make(chan struct{})
	var once sync.Once
	opts.OnProgress = func(Progress) {
		once.Do(func() { close(firstPage) })
		<-ctx.Done() // hold the run after its first batch until Run is stopped
	}
	r := e.reconciler(t, opts)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case <-firstPage:
	case <-time.After(waitBound):
		t.Fatal("Run did not start a pass")
	}
	if err := r.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(waitBound):
		t.Fatal("Run did not drain")
	}
	if n := len(e.lark.calls()); n != 1 {
		t.Fatalf("%d requests, want the first page only", n)
	}
	if cp, ok := e.checkpoint(t, ws, chat); !ok || cp.Position.MessageID != msgID("run", 4) {
		t.Fatalf("checkpoint %+v, want the first page's last message", cp)
	}
	if v := testutil.ToFloat64(r.m.runs.WithLabelValues(string(KindBackfill), "stopped")); v != 1 {
		t.Fatalf("runs{backfill,stopped} = %v", v)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v", err)
	}
}

// TestPageBudget: a run reads at most MaxPagesPerRun pages; a backfill continues
// over several runs from its checkpoint, and a truncated refresh still counts as
// done so that incremental runs resume.
func TestPageBudget(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-budget")
		chat = ids.ChatID("oc_budget")
	)
	e, created := newIncident(t, ws, chat, 2*time.Hour)
	e.lark.sayEvery(t, larktest.DeliverOnce, chat, "bud", 22, created, 4*time.Minute, "x")
	opts := e.options(t)
	opts.MaxPagesPerRun, opts.MaxThreadsPerChat, opts.ReconcileOverlap = 2, 1, time.Second
	r := e.reconciler(t, opts)
	ctx := ctxTimeout(t)
	var runs []ChatReport
	for len(runs) < 10 {
		c := runOne(t, ctx, r)
		runs = append(runs, c)
		if c.Err != nil || c.Pages > 2 {
			t.Fatalf("run %d: %+v", len(runs), c)
		}
		if c.Complete {
			break
		}
		if !errors.Is(c.Stopped, ErrPageBudget) || c.Kind != KindBackfill {
			t.Fatalf("run %d: %+v, want a backfill truncated by the page budget", len(runs), c)
		}
	}
	// 22 messages, 5 a page, 2 pages a run, each continuation re-reading its first
	// message (overlap 1 s): 10, 9, 3 new messages.
	if len(runs) != 3 {
		t.Fatalf("backfill took %d runs, want 3", len(runs))
	}
	if n := len(byMessage(e.evidence(t))); n != 22 {
		t.Fatalf("%d messages collected, want 22", n)
	}
	if v := testutil.ToFloat64(r.m.runs.WithLabelValues(string(KindBackfill), "truncated")); v != 2 {
		t.Fatalf("runs{backfill,truncated} = %v", v)
	}

	opts.Registry = nil // a second reconciler on the same registry would collide
	opts.EvidenceRefreshInterval = time.Nanosecond
	if c := runOne(t, ctx, e.reconciler(t, opts)); c.Kind != KindRefresh || !errors.Is(c.Stopped, ErrPageBudget) {
		t.Fatalf("refresh: %+v", c)
	}
	cp, _ := e.checkpoint(t, ws, chat)
	if cp.Meta.LastFullScanAt == nil || cp.Meta.LastFullScanAt.Before(runs[2].End) {
		t.Fatalf("truncated refresh not recorded: %+v", cp.Meta)
	}
	opts.EvidenceRefreshInterval = time.Hour
	if c := runOne(t, ctx, e.reconciler(t, opts)); c.Kind != KindIncremental || !c.Complete {
		t.Fatalf("after the truncated refresh: %+v", c)
	}
}

// TestBurstInOverlapDoesNotStallCoverage: more messages inside the overlap before
// the checkpoint than a run's page budget holds must not keep every run re-reading the
// overlap: past half its budget a run jumps to the checkpoint and coverage advances.
func TestBurstInOverlapDoesNotStallCoverage(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-burst")
		chat = ids.ChatID("oc_burst")
	)
	e, _ := newIncident(t, ws, chat, 2*time.Hour)
	burst := time.Now().Add(-30 * time.Minute)
	for i := range 40 { // 8 pages of 5 in one minute
		e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("burst", i), Chat: chat, At: burst.Add(time.Duration(i) * time.Second)}, "x")
	}
	for i := range 3 { // and after the burst
		e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("after", i), Chat: chat, At: burst.Add(time.Duration(10+i) * time.Minute)}, "x")
	}
	opts := e.options(t)
	opts.MaxPagesPerRun, opts.MaxThreadsPerChat = 4, 1 // the overlap (10 min) holds 8 pages
	r := e.reconciler(t, opts)
	ctx := ctxTimeout(t)
	var covered []time.Time
	for range 8 {
		if c := runOne(t, ctx, r); c.Err != nil || c.Pages > 4 {
			t.Fatalf("run: %+v", c)
		}
		cp, _ := e.checkpoint(t, ws, chat)
		covered = append(covered, cp.Position.Time)
		if cp.Meta.LastFullScanAt != nil && len(byMessage(e.evidence(t))) == 43 {
			break
		}
	}
	if n := len(byMessage(e.evidence(t))); n != 43 {
		t.Fatalf("%d of 43 messages collected; checkpoints %v", n, covered)
	}
	if v := testutil.ToFloat64(r.m.overlapSkips); v == 0 {
		t.Fatalf("no run cut its overlap short; checkpoints %v", covered)
	}
	t.Logf("checkpoints after each run: %v", covered)
}

// TestCheckpointPublishRetried: the checkpoint is committed in Postgres first; when
// publishing it fails, the run still succeeds, the failure is counted, and the
// next run publishes the current checkpoint.
func TestCheckpointPublishRetried(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-pub")
		chat = ids.ChatID("oc_pub")
	)
	e, created := newIncident(t, ws, chat, time.Hour)
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("pub", 0), Chat: chat, At: created.Add(time.Minute)}, "x")
	opts := e.options(t)
	opts.Producer = &failingProducer{Producer: e.prod, topic: e.cpTopic, fail: 1}
	r := e.reconciler(t, opts)
	ctx := ctxTimeout(t)
	if c := runOne(t, ctx, r); c.Err != nil || !c.Complete || c.Produced != 1 {
		t.Fatalf("run: %+v", c)
	}
	if _, ok := e.checkpoint(t, ws, chat); !ok {
		t.Fatal("checkpoint not committed")
	}
	if n := len(testenv.ReadTopic(t, e.cpTopic)); n != 0 {
		t.Fatalf("%d checkpoints published through a failing producer", n)
	}
	if v := testutil.ToFloat64(r.m.failures.WithLabelValues(reasonPublish)); v != 1 {
		t.Fatalf("failures{checkpoint_publish} = %v", v)
	}
	if !r.isPending(ids.ChatKey(ws, chat)) {
		t.Fatal("failed publish not remembered")
	}

	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	cp, _ := e.checkpoint(t, ws, chat)
	if cov := e.coverage(t)[ids.ChatKey(ws, chat)]; !cov.CoveredUntil.Equal(cp.Position.Time) {
		t.Fatalf("published coverage %+v, want the checkpoint %s", cov, cp.Position.Time)
	}
	if r.isPending(ids.ChatKey(ws, chat)) {
		t.Fatal("publish still pending")
	}
}

// TestCheckpointCarriesEvidenceBarrier: every published checkpoint carries one past
// the highest offset of the chat's evidence produced before it, on the partition the
// checkpoint itself goes to, so the window processor can hold the coverage until it
// has processed that evidence. A later run that produces nothing keeps the barrier.
func TestCheckpointCarriesEvidenceBarrier(t *testing.T) {
	const (
		ws   = ids.WorkspaceID("ws-bar")
		chat = ids.ChatID("oc_bar")
	)
	e, created := newIncident(t, ws, chat, 2*time.Hour)
	e.lark.sayEvery(t, larktest.DeliverDrop, chat, "bar", 12, created, 5*time.Minute, "status update")
	r := e.reconciler(t, e.options(t))
	ctx := ctxTimeout(t)
	if c := runOne(t, ctx, r); c.Err != nil || !c.Complete || c.Produced != 12 {
		t.Fatalf("run: %+v", c)
	}

	type produced struct {
		partition  int32
		offset     int64
		occurredAt time.Time
	}
	var evidence []produced
	evPartition := int32(-1)
	for _, rec := range testenv.ReadTopic(t, e.evTopic) {
		v, err := e.codecs.Evidence.Decode(ctx, rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		evidence = append(evidence, produced{rec.Partition, rec.Offset, v.OccurredAt})
		if evPartition >= 0 && rec.Partition != evPartition {
			t.Fatalf("evidence of one chat on partitions %d and %d", evPartition, rec.Partition)
		}
		evPartition = rec.Partition
	}
	maxEnd := int64(0)
	for _, p := range evidence {
		maxEnd = max(maxEnd, p.offset+1)
	}
	cps := testenv.ReadTopic(t, e.cpTopic)
	if len(cps) < 2 {
		t.Fatalf("%d checkpoints, want one per page", len(cps))
	}
	var last int64
	for i, rec := range cps {
		cp, err := e.codecs.Checkpoint.Decode(ctx, rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Partition != evPartition {
			t.Fatalf("checkpoint %d on partition %d, the chat's evidence on %d", i, rec.Partition, evPartition)
		}
		if cp.EvidenceEndOffset <= 0 || cp.EvidenceEndOffset < last || cp.EvidenceEndOffset > maxEnd {
			t.Fatalf("checkpoint %d barrier %d (previous %d, evidence end %d)", i, cp.EvidenceEndOffset, last, maxEnd)
		}
		for _, p := range evidence {
			if !p.occurredAt.After(cp.CoveredUntil) && p.offset >= cp.EvidenceEndOffset {
				t.Fatalf("checkpoint %d covers evidence at offset %d (%s) but its barrier is %d", i, p.offset, p.occurredAt, cp.EvidenceEndOffset)
			}
		}
		last = cp.EvidenceEndOffset
	}
	if last != maxEnd {
		t.Fatalf("last checkpoint barrier %d, want the chat's evidence end %d", last, maxEnd)
	}

	// A run that produces nothing still publishes the barrier of what came before.
	e.sinkAll(t)
	if c := runOne(t, ctx, r); c.Err != nil || c.Produced != 0 {
		t.Fatalf("second run: %+v", c)
	}
	for i, rec := range testenv.ReadTopic(t, e.cpTopic)[len(cps):] {
		cp, err := e.codecs.Checkpoint.Decode(ctx, rec.Value)
		if err != nil {
			t.Fatal(err)
		}
		if cp.EvidenceEndOffset != maxEnd {
			t.Fatalf("checkpoint %d of the second run has barrier %d, want %d", i, cp.EvidenceEndOffset, maxEnd)
		}
	}
}

// TestRefreshRecallReachesEveryHolder (issue #29): a deletion reconciliation finds in
// one workspace's chat is applied in every workspace that holds the message, here one
// that recovered and was unbound, which reconciliation never reads any more.
func TestRefreshRecallReachesEveryHolder(t *testing.T) {
	const (
		ws    = ids.WorkspaceID("ws-holder-new")
		old   = ids.WorkspaceID("ws-holder-old")
		other = ids.WorkspaceID("ws-holder-none")
		chat  = ids.ChatID("oc_holder")
	)
	e, created := newIncident(t, ws, chat, 3*time.Hour)
	e.workspace(t, old, "incident", store.WorkspaceRecovered, created)   // bound no more
	e.workspace(t, other, "incident", store.WorkspaceRecovered, created) // never held it
	e.lark.say(t, larktest.DeliverOnce, larktest.Msg{ID: msgID("hold", 0), Chat: chat, At: created.Add(10 * time.Minute)}, "the password is hunter2")
	ctx := ctxTimeout(t)
	if c := runOne(t, ctx, e.reconciler(t, e.options(t))); c.Produced != 1 {
		t.Fatalf("backfill: %+v", c)
	}
	e.sinkAll(t)
	// The old workspace holds the message too (it was bound when it was sent).
	rows, err := e.st.EvidenceByKeys(ctx, ws, store.LarkMessageEvidence, []string{ids.MessageSourceKey(chat, msgID("hold", 0))})
	if err != nil || len(rows) != 1 {
		t.Fatalf("stored: %v %v", rows, err)
	}
	copyRow := rows[0]
	copyRow.WorkspaceID = old
	if _, err := e.st.UpsertEvidence(ctx, []store.Evidence{copyRow}); err != nil {
		t.Fatal(err)
	}

	if err := e.lark.srv.AddEvent(larktest.DeliverDrop, e.lark.builder.Recall(msgID("hold", 0), chat, time.Now().Add(-time.Minute), "")); err != nil {
		t.Fatal(err)
	}
	opts := e.options(t)
	opts.EvidenceRefreshInterval = time.Nanosecond // due at once
	if c := runOne(t, ctx, e.reconciler(t, opts)); c.Produced != 1 {
		t.Fatalf("refresh: %+v", c)
	}
	redacted := map[ids.WorkspaceID]bool{}
	for _, r := range e.evidence(t) {
		if r.Deleted {
			if r.Content != "" {
				t.Fatalf("deletion of %s keeps text: %+v", r.WorkspaceID, r)
			}
			redacted[r.WorkspaceID] = true
		}
	}
	if !redacted[ws] || !redacted[old] || redacted[other] || len(redacted) != 2 {
		t.Fatalf("redacted in %v, want %s and %s only", redacted, ws, old)
	}
}
