package kafka

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/testenv"
)

func TestLimitsAreConsistent(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a record fits a batch with a MiB to spare", MaxBatchBytes-MaxRecordBytes >= 1<<20},
		{"a full fetch plus one large batch fits a response", BrokerMaxReadBytes >= FetchMaxBytes+MaxBatchBytes+1<<20},
		{"sarama accepts the batch limit (below MaxRequestSize)", MaxBatchBytes < int(sarama.MaxRequestSize)},
		{"sarama reads a large batch (below MaxResponseSize)", MaxBatchBytes < int(sarama.MaxResponseSize)},
		{"other topics' batches fit Kafka's default message.max.bytes", DefaultBatchMaxBytes <= 1_048_588},
		{"franz-go accepts the batch limits", MaxBatchBytes <= 1<<30 && DefaultBatchMaxBytes >= 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				t.Fatal("violated")
			}
		})
	}
}

func TestSaramaConfigAllowsLargeRecords(t *testing.T) {
	c, err := SaramaConfig(validGokaOptions())
	if err != nil {
		t.Fatal(err)
	}
	if c.Producer.MaxMessageBytes != MaxBatchBytes {
		t.Errorf("Producer.MaxMessageBytes = %d, want MaxBatchBytes %d", c.Producer.MaxMessageBytes, MaxBatchBytes)
	}
	if c.Consumer.Fetch.Default != 1<<20 || c.Consumer.Fetch.Max != 0 {
		t.Errorf("Consumer.Fetch.Default, Max = %d, %d; want 1 MiB, 0 (no limit)", c.Consumer.Fetch.Default, c.Consumer.Fetch.Max)
	}
}

func TestNewClientOptionsLimits(t *testing.T) {
	tests := []struct {
		name      string
		large     []string
		wantBatch map[string]int32
	}{
		{"no large-record topics", nil, map[string]int32{
			"larkline.windows.closed.v1": DefaultBatchMaxBytes, "larkline.evidence.v1": DefaultBatchMaxBytes, "": DefaultBatchMaxBytes,
		}},
		{"dead letters may be large", []string{"larkline.deadletter.v1"}, map[string]int32{
			"larkline.deadletter.v1": MaxBatchBytes, "larkline.evidence.v1": DefaultBatchMaxBytes, "": DefaultBatchMaxBytes,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			o.Producer.LargeRecordTopics = tt.large
			opts, err := NewClientOptions(o)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatalf("franz-go rejected the options: %v", err)
			}
			defer cl.Close()
			wantOpt(t, cl, kgo.FetchMaxBytes, int32(FetchMaxBytes))
			wantOpt(t, cl, kgo.FetchMaxPartitionBytes, int32(FetchMaxPartitionBytes))
			wantOpt(t, cl, kgo.BrokerMaxReadBytes, int32(BrokerMaxReadBytes))
			fn, ok := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)
			if !ok || fn == nil {
				t.Fatalf("ProducerBatchMaxBytesFn = %T, want a function", cl.OptValue(kgo.ProducerBatchMaxBytesFn))
			}
			for topic, want := range tt.wantBatch {
				if got := fn(topic); got != want {
					t.Errorf("batch limit of %q = %d, want %d", topic, got, want)
				}
			}
		})
	}
	t.Run("invalid large-record topic", func(t *testing.T) {
		o := validOptions()
		o.Producer.LargeRecordTopics = []string{"bad topic"}
		if _, err := NewClientOptions(o); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("err = %v, want ErrInvalidOptions", err)
		}
	})
}

func TestDefaultTopicSpecsLargeRecordTopics(t *testing.T) {
	names := DefaultTopicNames()
	want := map[string]string{
		names.Evidence: "", names.Checkpoints: "", names.Workspaces: "",
		names.WindowsClosed: strconv.Itoa(MaxBatchBytes), names.DeadLetter: strconv.Itoa(MaxBatchBytes),
	}
	for _, s := range DefaultTopicSpecs(names, 3, 1) {
		if got := s.Configs[ConfigMaxMessageBytes]; got != want[s.Name] {
			t.Errorf("%s: max.message.bytes %q, want %q", s.Name, got, want[s.Name])
		}
	}
}

func TestSameConfigTreatsMaxMessageBytesAsALowerBound(t *testing.T) {
	want := strconv.Itoa(MaxBatchBytes)
	tests := []struct {
		got  string
		same bool
	}{
		{want, true},
		{strconv.Itoa(64 << 20), true},
		{"1048588", false},
		{"", false},
		{"lots", false},
	}
	for _, tt := range tests {
		t.Run(tt.got, func(t *testing.T) {
			if got := sameConfig(ConfigMaxMessageBytes, want, tt.got); got != tt.same {
				t.Fatalf("sameConfig(%s, %s) = %v, want %v", want, tt.got, got, tt.same)
			}
		})
	}
}

// TestLargeRecordRoundTripOnRealBroker writes a record of MaxRecordBytes (random, so
// compression cannot shrink it) with larkline's franz-go producer options to a topic
// with the closed-window spec, and reads it back with larkline's consumer options; a
// topic not listed as large keeps franz-go's default batch limit.
func TestLargeRecordRoundTripOnRealBroker(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	var large map[string]*string
	for _, s := range DefaultTopicSpecs(DefaultTopicNames(), 1, 1) {
		if s.Name == DefaultTopicNames().WindowsClosed {
			large = configPtrs(s.Configs)
		}
	}
	topic := newTestTopic(t, 1, large)
	small := newTestTopic(t, 1, nil)
	o := Options{Brokers: brokersForTest(t), ClientID: "larkline-kafka-test"}
	o.Producer.LargeRecordTopics = []string{topic}
	opts, err := NewClientOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	key := []byte("ws/oc_chat")
	value := make([]byte, MaxRecordBytes-len(key))
	if _, err := rand.Read(value); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: key, Value: value}).FirstErr(); err != nil {
		t.Fatalf("producing a record of MaxRecordBytes: %v", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: small, Key: key, Value: value[:2<<20]}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 2 MiB record to a topic not listed as large: err = %v, want MessageTooLarge", err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading the large record back: %v", err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		if recs := fs.Records(); len(recs) > 0 {
			if !bytes.Equal(recs[0].Value, value) {
				t.Fatalf("read back %d bytes, not the %d written", len(recs[0].Value), len(value))
			}
			return
		}
	}
}

// TestGokaTopicManagerOnRealBroker checks the topic manager NewGoka installs on
// Goka's own topics: it creates them with Goka's settings and the record limit,
// raises a smaller limit of existing ones (never lowers a larger one), and Goka's own
// checks still refuse a mismatch.
func TestGokaTopicManagerOnRealBroker(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	_, adm := adminForTest(t)
	g := gokaForTest(t)
	tm, err := g.topicManagerBuilder()(brokersForTest(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tm.Close(); err != nil {
			t.Errorf("closing the topic manager: %v", err)
		}
	}()
	configOf := func(t *testing.T, topic, key string) string {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == key {
				return c.MaybeValue()
			}
		}
		return ""
	}
	create := func(t *testing.T, topic string, partitions int32, configs map[string]string) {
		t.Helper()
		deleteTopicsAtCleanup(t, adm, topic)
		resp, err := adm.CreateTopic(ctx, partitions, 1, configPtrs(configs), topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := waitForTopics(ctx, adm, []string{topic}); err != nil {
			t.Fatal(err)
		}
	}
	limit := strconv.Itoa(MaxBatchBytes)
	retention := strconv.FormatInt(DefaultStreamRetention.Milliseconds(), 10)

	t.Run("creates loop and table with the limit", func(t *testing.T) {
		group := uniqueName(t, "larkline-tm")
		loop, table := group+"-loop", group+"-table"
		deleteTopicsAtCleanup(t, adm, loop, table)
		if err := tm.EnsureStreamExists(loop, 3); err != nil {
			t.Fatal(err)
		}
		if err := tm.EnsureTableExists(table, 3); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ topic, key, want string }{
			{loop, ConfigMaxMessageBytes, limit}, {loop, ConfigCleanupPolicy, CleanupDelete}, {loop, ConfigRetentionMs, retention},
			{table, ConfigMaxMessageBytes, limit}, {table, ConfigCleanupPolicy, CleanupCompact},
		} {
			if got := configOf(t, c.topic, c.key); got != c.want {
				t.Errorf("%s: %s = %q, want %q", c.topic, c.key, got, c.want)
			}
		}
		details, err := adm.ListTopics(ctx, loop, table)
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{loop, table} {
			if n := len(details[topic].Partitions); n != 3 {
				t.Errorf("%s: %d partitions, want 3", topic, n)
			}
		}
		// a second start finds them as they should be
		if err := tm.EnsureStreamExists(loop, 3); err != nil {
			t.Fatal(err)
		}
		if err := tm.EnsureTableExists(table, 3); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("raises a smaller limit, keeps a larger one", func(t *testing.T) {
		group := uniqueName(t, "larkline-tm")
		loop, table := group+"-loop", group+"-table"
		create(t, loop, 2, map[string]string{ConfigCleanupPolicy: CleanupDelete, ConfigRetentionMs: retention}) // broker default limit
		create(t, table, 2, map[string]string{ConfigCleanupPolicy: CleanupCompact, ConfigMaxMessageBytes: strconv.Itoa(64 << 20)})
		if err := tm.EnsureStreamExists(loop, 2); err != nil {
			t.Fatal(err)
		}
		if err := tm.EnsureTableExists(table, 2); err != nil {
			t.Fatal(err)
		}
		if got := configOf(t, loop, ConfigMaxMessageBytes); got != limit {
			t.Errorf("loop: max.message.bytes = %q, want raised to %s", got, limit)
		}
		if got := configOf(t, loop, ConfigCleanupPolicy); got != CleanupDelete {
			t.Errorf("loop: cleanup.policy = %q after raising the limit", got)
		}
		if got := configOf(t, table, ConfigMaxMessageBytes); got != strconv.Itoa(64<<20) {
			t.Errorf("table: max.message.bytes = %q, want the larger limit kept", got)
		}
	})

	t.Run("goka still refuses a mismatch", func(t *testing.T) {
		group := uniqueName(t, "larkline-tm")
		table := group + "-table"
		create(t, table, 2, map[string]string{ConfigCleanupPolicy: CleanupCompact})
		if err := tm.EnsureTableExists(table, 3); err == nil {
			t.Fatal("a table with 2 partitions accepted for a 3-partition group")
		}
		loop := group + "-loop"
		create(t, loop, 3, map[string]string{ConfigCleanupPolicy: CleanupCompact})
		if err := tm.EnsureStreamExists(loop, 3); err == nil {
			t.Fatal("a compacted loop topic accepted")
		}
	})
}
