package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larktest"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// sinkingProducer produces through the real client and, once Kafka acknowledged
// them, writes evidence records into the store as the evidence sink would: the
// reconciler's "already stored?" check then sees what earlier runs produced.
type sinkingProducer struct {
	evidence.Producer
	st    *store.Store
	codec *schemas.Codec[schemas.EvidenceRecord]
	topic string
}

func (p *sinkingProducer) ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults {
	res := p.Producer.ProduceSync(ctx, rs...)
	if res.FirstErr() != nil || len(rs) == 0 || rs[0].Topic != p.topic {
		return res
	}
	rows := make([]store.Evidence, 0, len(rs))
	for _, r := range rs {
		v, err := p.codec.Decode(ctx, r.Value)
		if err != nil {
			panic(err)
		}
		rows = append(rows, store.Evidence{
			WorkspaceID: v.WorkspaceID, Source: v.Source, SourceType: v.SourceType, SourceKey: v.SourceKey,
			OccurredAt: v.OccurredAt, SourceUpdatedAt: v.SourceUpdatedAt, ObservedAt: v.ObservedAt, ActorID: v.ActorID,
			Content: v.Content, ContentHash: v.ContentHash, Metadata: json.RawMessage(v.MetadataJSON),
			Deleted: v.Deleted, SynthesisEligible: v.SynthesisEligible,
		})
	}
	if _, err := p.st.UpsertEvidence(ctx, rows); err != nil {
		panic(err)
	}
	return res
}

// BenchmarkReconcileAPICalls measures Lark API usage of automatic reconciliation
// under different overlap windows (and windows of thread activity re-read by
// incremental runs): 4 chats, each with a steady 4 messages a minute
// of which every tenth starts a thread that gets two replies, reconciled every 5
// minutes on a simulated clock (Lark and the reconciler share it). Each iteration
// is one pass after 5 more minutes of traffic; the first hour is backfilled before
// the timer starts. Reported per chat and run: history calls (chat + thread
// containers), chat pages, thread pages and evidence records produced, and the
// calls of incremental and of refresh runs (one chat in twelve runs is a refresh,
// over the 24-hour refresh lookback) separately.
//
//	go test -run '^$' -bench BenchmarkReconcileAPICalls -benchtime 24x ./connectors/lark/reconcile/
func BenchmarkReconcileAPICalls(b *testing.B) {
	for _, threadWindow := range []time.Duration{30 * time.Minute, time.Hour} {
		for _, overlap := range []time.Duration{time.Minute, 10 * time.Minute, 30 * time.Minute} {
			b.Run(fmt.Sprintf("overlap=%s/threads=%s", overlap, threadWindow), func(b *testing.B) { benchAPICalls(b, overlap, threadWindow) })
		}
	}
}

func benchAPICalls(b *testing.B, overlap, threadWindow time.Duration) {
	const (
		nChats   = 4
		interval = 5 * time.Minute
		every    = 15 * time.Second
	)
	ft := testenv.NewClock(time.Now().Add(-24 * time.Hour).Truncate(time.Second))
	chats := make([]ids.ChatID, nChats)
	for i := range chats {
		chats[i] = ids.ChatID(fmt.Sprintf("oc_bench%d", i))
	}
	e := newEnvAt(b, ft.Now, chats...)
	ws := ids.WorkspaceID("ws-bench")
	start := ft.Now()
	e.workspace(b, ws, "incident", store.WorkspaceFiring, start, chats...)

	seq := 0
	traffic := func(from, to time.Time) {
		for _, c := range chats {
			for at := from; at.Before(to); at = at.Add(every) {
				seq++
				id := ids.MessageID(fmt.Sprintf("om_b%07d", seq))
				e.lark.say(b, larktest.DeliverDrop, larktest.Msg{ID: id, Chat: c, At: at}, "status")
				if seq%10 != 0 {
					continue
				}
				thread := fmt.Sprintf("omt_b%07d", seq)
				for k := 1; k <= 2; k++ {
					seq++
					e.lark.say(b, larktest.DeliverDrop, larktest.Msg{ID: ids.MessageID(fmt.Sprintf("om_b%07d", seq)), Chat: c,
						At: at.Add(time.Duration(k) * 5 * time.Second), RootID: id, ParentID: id, ThreadID: thread}, "reply")
				}
			}
		}
	}

	opts := e.options(b)
	opts.Logger = nil
	opts.PageSize = MaxPageSize
	opts.ReconcileOverlap = overlap
	opts.ThreadActiveWindow = threadWindow
	opts.Clock, opts.Sleep = ft.Now, ft.Sleep
	opts.Producer = &sinkingProducer{Producer: e.prod, st: e.st, codec: e.codecs.Evidence, topic: e.evTopic}
	r, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	// The first hour, backfilled outside the measurement.
	traffic(start, start.Add(time.Hour))
	_ = ft.Sleep(ctx, time.Hour)
	rep, err := r.RunOnce(ctx)
	if err != nil || rep.Failed() > 0 {
		b.Fatalf("backfill: %+v %v", rep, err)
	}
	backfillCalls := len(e.lark.calls())

	var chatPages, threadPages, produced, incrCalls, incrRuns, refreshCalls, refreshRuns int
	callsBefore := len(e.lark.calls())
	b.ResetTimer()
	for range b.N {
		now := ft.Now()
		traffic(now, now.Add(interval))
		_ = ft.Sleep(ctx, interval)
		rep, err := r.RunOnce(ctx)
		if err != nil || rep.Failed() > 0 {
			b.Fatalf("run: %+v %v", rep, err)
		}
		for _, c := range rep.Chats {
			chatPages += c.Pages
			threadPages += c.ThreadPages
			produced += c.Produced
			switch c.Kind {
			case KindIncremental:
				incrCalls += c.Pages + c.ThreadPages
				incrRuns++
			case KindRefresh:
				refreshCalls += c.Pages + c.ThreadPages
				refreshRuns++
			}
		}
	}
	b.StopTimer()
	runs := float64(b.N * nChats)
	b.ReportMetric(float64(len(e.lark.calls())-callsBefore)/runs, "calls/chat/run")
	b.ReportMetric(float64(chatPages)/runs, "chat-pages/chat/run")
	b.ReportMetric(float64(threadPages)/runs, "thread-pages/chat/run")
	b.ReportMetric(float64(produced)/runs, "produced/chat/run")
	b.ReportMetric(float64(backfillCalls)/nChats, "backfill-calls/chat")
	if incrRuns > 0 {
		b.ReportMetric(float64(incrCalls)/float64(incrRuns), "calls/incremental-run")
	}
	if refreshRuns > 0 {
		b.ReportMetric(float64(refreshCalls)/float64(refreshRuns), "calls/refresh-run")
	}
}
