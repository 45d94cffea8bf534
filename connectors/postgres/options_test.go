package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// fakeWriter is a Writer for unit tests: it fails as told and
// otherwise records what it was asked to write.
type fakeWriter struct {
	upsert func(batch []store.Evidence) ([]store.UpsertOutcome, error)
	del    func(ws ids.WorkspaceID, keys []string) (int64, error)
}

func (f *fakeWriter) UpsertEvidence(_ context.Context, batch []store.Evidence) ([]store.UpsertOutcome, error) {
	if f.upsert != nil {
		return f.upsert(batch)
	}
	out := make([]store.UpsertOutcome, len(batch))
	for i := range out {
		out[i] = store.UpsertOutcome{ID: int64(i + 1), Result: store.EvidenceInserted}
	}
	return out, nil
}

func (f *fakeWriter) EvidenceByKeys(context.Context, ids.WorkspaceID, store.EvidenceKind, []string) ([]store.Evidence, error) {
	return nil, nil
}

func (f *fakeWriter) DeleteEvidence(_ context.Context, ws ids.WorkspaceID, _ store.EvidenceKind, keys []string) (int64, error) {
	if f.del != nil {
		return f.del(ws, keys)
	}
	return int64(len(keys)), nil
}

func validOptions(t testing.TB) Options {
	t.Helper()
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Kafka: kafka.Options{Brokers: []string{"127.0.0.1:9092"}}, Store: &fakeWriter{}, Codecs: codecs}
}

func TestNewValidatesOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string // substring of the error; "" means valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no store", func(o *Options) { o.Store = nil }, "store is required"},
		{"no codecs", func(o *Options) { o.Codecs = nil }, "codecs"},
		{"no brokers", func(o *Options) { o.Kafka.Brokers = nil }, "Brokers"},
		{"blank group", func(o *Options) { o.Group = "  " }, "group is blank"},
		{"same topics", func(o *Options) { o.EvidenceTopic, o.DeadLetterTopic = "t", "t" }, "both"},
		{"bad topic name", func(o *Options) { o.EvidenceTopic = "bad topic" }, "topic name"},
		{"batch too large", func(o *Options) { o.MaxBatchRecords = MaxBatchRecords + 1 }, "max batch records"},
		{"negative batch", func(o *Options) { o.MaxBatchRecords = -1 }, "max batch records"},
		{"too many writers", func(o *Options) { o.Writers = MaxWriters + 1 }, "writers"},
		{"attempt longer than half the rebalance timeout", func(o *Options) {
			o.Kafka.Consumer.RebalanceTimeout = 20 * time.Second
			o.AttemptTimeout = 11 * time.Second
		}, "attempt timeout"},
		{"attempt timeout defaults under a short rebalance timeout", func(o *Options) {
			o.Kafka.Consumer.RebalanceTimeout = 10 * time.Second
		}, ""},
		{"backoff min above max", func(o *Options) { o.RetryBackoffMin, o.RetryBackoffMax = time.Second, time.Millisecond }, "retry backoff"},
		{"negative drain", func(o *Options) { o.DrainTimeout = -time.Second }, "drain timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions(t)
			tc.mutate(&o)
			s, err := New(o)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				s.Close()
				return
			}
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want ErrInvalidOptions mentioning %q", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s, err := New(validOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := kafka.DefaultTopicNames()
	o := s.o
	if o.Group != DefaultGroup || o.EvidenceTopic != names.Evidence || o.DeadLetterTopic != names.DeadLetter ||
		o.MaxBatchRecords != DefaultMaxBatchRecords || o.Writers != DefaultWriters ||
		o.AttemptTimeout != DefaultAttemptTimeout || o.RetryBackoffMin != DefaultRetryBackoffMin ||
		o.RetryBackoffMax != DefaultRetryBackoffMax || o.DrainTimeout != DefaultDrainTimeout || o.Clock == nil {
		t.Errorf("defaults not applied: %+v", o)
	}
}

func TestMetricsRegisterOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := validOptions(t)
	o.Registry = reg
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("second sink on the same registry: %v, want ErrInvalidOptions", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "larkline_sink_") {
			t.Errorf("metric %s lacks the larkline_sink_ prefix", mf.GetName())
		}
	}
}

func TestRunOnceAndAfterClose(t *testing.T) {
	s, err := New(validOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
	s.Close() // idempotent
}
