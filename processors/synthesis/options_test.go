package synthesis

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/rules"
	"github.com/larkline/larkline/schemas"
)

func validOptions(t *testing.T) Options {
	t.Helper()
	codecs, err := schemas.NewCodecs(schemas.Topics{})
	if err != nil {
		t.Fatal(err)
	}
	syn, err := rules.New(rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Kafka:       kafka.Options{Brokers: []string{"127.0.0.1:9092"}},
		Store:       &store.Store{},
		Codecs:      codecs,
		Synthesizer: syn,
		Summarizer:  syn,
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	w, err := New(validOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	o := w.o
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"group", o.Group, DefaultGroup},
		{"topic", o.Topic, kafka.DefaultTopicNames().WindowsClosed},
		{"dead-letter topic", o.DeadLetterTopic, kafka.DefaultTopicNames().DeadLetter},
		{"context lookback", o.ContextLookback, 5 * time.Minute},
		{"stale timeout", o.StaleTimeout, 15 * time.Minute},
		{"max attempts", o.MaxAttempts, 3},
		{"scan interval", o.ScanInterval, 2 * time.Minute},
		{"evidence batch limit", o.EvidenceBatchLimit, 40},
		{"max tokens", o.MaxEstimatedTokensPerChunk, 6000},
		{"concurrency", o.MaxConcurrentSynthesis, 2},
		{"chunk retries", *o.ChunkRetries, DefaultChunkRetries},
		{"max existing entries", *o.MaxExistingEntries, DefaultMaxExistingEntries},
		{"max context messages", *o.MaxContextMessages, DefaultMaxContextMessages},
		{"model outage backoff max", o.ModelOutageBackoffMax, DefaultModelOutageBackoffMax},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	o2 := validOptions(t)
	o2.ChunkRetries, o2.MaxExistingEntries, o2.MaxContextMessages = new(0), new(0), new(0)
	w2, err := New(o2)
	if err != nil {
		t.Fatal(err)
	}
	if *w2.o.ChunkRetries != 0 {
		t.Errorf("ChunkRetries 0 gave %d retries", *w2.o.ChunkRetries)
	}
	if *w2.o.MaxExistingEntries != 0 || *w2.o.MaxContextMessages != 0 {
		t.Errorf("MaxExistingEntries and MaxContextMessages 0 gave %d and %d", *w2.o.MaxExistingEntries, *w2.o.MaxContextMessages)
	}
}

// TestNewLetsDeadLettersParkLargeRecords: a closed window that cannot be decoded is
// parked whole, so the dead-letter topic is a large-record topic of the worker's
// producer (batches up to kafka.MaxBatchBytes) and no other topic is.
func TestNewLetsDeadLettersParkLargeRecords(t *testing.T) {
	tests := []struct {
		name  string
		dead  string
		given []string
		want  []string
	}{
		{"default dead-letter topic", "", nil, []string{kafka.DefaultTopicNames().DeadLetter}},
		{"configured dead-letter topic", "ops.dlq", nil, []string{"ops.dlq"}},
		{"already listed", "ops.dlq", []string{"ops.dlq"}, []string{"ops.dlq"}},
		{"others kept", "ops.dlq", []string{"other"}, []string{"other", "ops.dlq"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions(t)
			o.DeadLetterTopic = tt.dead
			o.Kafka.Producer.LargeRecordTopics = tt.given
			w, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if got := w.o.Kafka.Producer.LargeRecordTopics; !slices.Equal(got, tt.want) {
				t.Fatalf("large-record topics %v, want %v", got, tt.want)
			}
			if len(tt.given) > 0 && len(tt.given) != len(o.Kafka.Producer.LargeRecordTopics) {
				t.Fatal("New changed the caller's slice")
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"no store", func(o *Options) { o.Store = nil }, "Store"},
		{"no codecs", func(o *Options) { o.Codecs = nil }, "Codecs"},
		{"no synthesizer", func(o *Options) { o.Synthesizer = nil }, "Synthesizer"},
		{"no brokers", func(o *Options) { o.Kafka.Brokers = nil }, "Brokers"},
		{"same topics", func(o *Options) { o.Topic, o.DeadLetterTopic = "t", "t" }, "DeadLetterTopic"},
		{"batch limit too large", func(o *Options) { o.EvidenceBatchLimit = MaxEvidenceBatchLimit + 1 }, "EvidenceBatchLimit"},
		{"negative batch limit", func(o *Options) { o.EvidenceBatchLimit = -1 }, "EvidenceBatchLimit"},
		{"token budget too small", func(o *Options) { o.MaxEstimatedTokensPerChunk = 10 }, "MaxEstimatedTokensPerChunk"},
		{"no concurrency", func(o *Options) { o.MaxConcurrentSynthesis = -1 }, "MaxConcurrentSynthesis"},
		{"attempts", func(o *Options) { o.MaxAttempts = -3 }, "MaxAttempts"},
		{"backoff inverted", func(o *Options) { o.RetryBackoffMin, o.RetryBackoffMax = time.Minute, time.Second }, "RetryBackoffMax"},
		{"stale timeout under the heartbeat's floor", func(o *Options) { o.StaleTimeout = 2 * time.Second }, "StaleTimeout"},
		{"chunk retries", func(o *Options) { o.ChunkRetries = new(11) }, "ChunkRetries"},
		{"negative chunk retries", func(o *Options) { o.ChunkRetries = new(-1) }, "ChunkRetries"},
		{"negative existing entries", func(o *Options) { o.MaxExistingEntries = new(-1) }, "MaxExistingEntries"},
		{"existing entries above a page", func(o *Options) { o.MaxExistingEntries = new(store.MaxPageSize + 1) }, "MaxExistingEntries"},
		{"negative context messages", func(o *Options) { o.MaxContextMessages = new(-1) }, "MaxContextMessages"},
		{"context messages above a page", func(o *Options) { o.MaxContextMessages = new(store.MaxPageSize + 1) }, "MaxContextMessages"},
		{"model outage backoff below the retry backoff", func(o *Options) {
			o.RetryBackoffMin, o.ModelOutageBackoffMax = time.Second, time.Millisecond
		}, "ModelOutageBackoffMax"},
		{"model outage backoff too long", func(o *Options) { o.ModelOutageBackoffMax = 2 * time.Hour }, "ModelOutageBackoffMax"},
		{"negative model outage backoff", func(o *Options) { o.ModelOutageBackoffMax = -time.Second }, "ModelOutageBackoffMax"},
		{"negative drain", func(o *Options) { o.DrainTimeout = -time.Second }, "DrainTimeout"},
		{"prompt version too long", func(o *Options) { o.PromptVersion = strings.Repeat("v", 65) }, "PromptVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions(t)
			tc.mutate(&o)
			_, err := New(o)
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("err = %v, want ErrInvalidOptions", err)
			}
			if !hasProblem(err, tc.want) {
				t.Fatalf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
}

func TestNewRegistersMetricsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := validOptions(t)
	o.Registry = reg
	if _, err := New(o); err != nil {
		t.Fatal(err)
	}
	if _, err := New(o); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("second registration on one registry: err = %v, want ErrInvalidOptions", err)
	}
}

// hasProblem reports whether err names field among its option problems, or (for
// the Kafka options, which report as text) mentions it.
func hasProblem(err error, field string) bool {
	for _, p := range options.ProblemsOf(err) {
		if p.Field == field {
			return true
		}
	}
	return strings.Contains(err.Error(), field)
}
