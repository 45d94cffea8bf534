package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/larkline/larkline/internal/ids"
)

const benchBatch = 500

func benchBatchOf(ws ids.WorkspaceID, round int, text string) []Evidence {
	batch := make([]Evidence, benchBatch)
	for i := range batch {
		at := t0.Add(time.Duration(round*benchBatch+i) * time.Millisecond)
		batch[i] = larkEvidence(ws, "oc_bench", fmt.Sprintf("om_%d_%d", round, i), at, text)
		batch[i].ObservedAt = at
	}
	return batch
}

func reportRows(b *testing.B) {
	b.ReportMetric(float64(benchBatch*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkUpsertEvidence measures UpsertEvidence with batches of 500 rows: new rows
// (insert), the same versions again (unchanged duplicates) and new versions (update).
func BenchmarkUpsertEvidence(b *testing.B) {
	s := newTestStore(b)
	ctx := context.Background()
	b.Run("insert", func(b *testing.B) {
		round := 0
		for b.Loop() {
			b.StopTimer()
			batch := benchBatchOf("ws-bench-insert", round, "message text of a typical length for a chat")
			round++
			b.StartTimer()
			if _, err := s.UpsertEvidence(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b)
	})
	b.Run("unchanged", func(b *testing.B) {
		batch := benchBatchOf("ws-bench-dup", 0, "message text of a typical length for a chat")
		if _, err := s.UpsertEvidence(ctx, batch); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.UpsertEvidence(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b)
	})
	b.Run("update", func(b *testing.B) {
		batch := benchBatchOf("ws-bench-update", 0, "v0")
		if _, err := s.UpsertEvidence(ctx, batch); err != nil {
			b.Fatal(err)
		}
		v := 0
		for b.Loop() {
			b.StopTimer()
			v++
			for i := range batch {
				batch[i] = edited(batch[i], batch[i].SourceUpdatedAt.Add(time.Millisecond), fmt.Sprintf("v%d", v))
			}
			b.StartTimer()
			if _, err := s.UpsertEvidence(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		reportRows(b)
	})
}

// BenchmarkCopyFromEvidence is the floor for BenchmarkUpsertEvidence/insert: the same
// rows written with a raw COPY (no conflict handling, no per-row outcome).
func BenchmarkCopyFromEvidence(b *testing.B) {
	s := newTestStore(b)
	ctx := context.Background()
	cols := []string{"workspace_id", "source", "source_type", "source_key", "occurred_at", "source_updated_at",
		"observed_at", "actor_id", "actor_display_name", "content", "content_hash", "metadata_json", "deleted", "synthesis_eligible"}
	round := 0
	for b.Loop() {
		b.StopTimer()
		batch := benchBatchOf("ws-bench-copy", round, "message text of a typical length for a chat")
		round++
		b.StartTimer()
		n, err := s.pool.CopyFrom(ctx, pgx.Identifier{"workspace_timeline_evidence"}, cols,
			pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
				e := &batch[i]
				return []any{string(e.WorkspaceID), e.Source, e.SourceType, e.SourceKey, e.OccurredAt, e.SourceUpdatedAt,
					e.ObservedAt, e.ActorID, e.ActorDisplayName, e.Content, e.ContentHash, string(e.Metadata), e.Deleted, e.SynthesisEligible}, nil
			}))
		if err != nil || n != benchBatch {
			b.Fatalf("CopyFrom = %d, %v", n, err)
		}
	}
	reportRows(b)
}
