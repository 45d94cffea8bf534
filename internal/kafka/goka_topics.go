package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GokaTopicTimeout bounds what the topic manager does on Goka's own topics before
// Goka checks them: creating one, or raising its max.message.bytes.
const GokaTopicTimeout = 60 * time.Second

// gokaTopicManager is Goka's topic manager with larkline's record limit on the
// topics Goka owns. Goka creates a processor's <group>-loop stream and <group>-table
// table itself (EnsureStreamExists, EnsureTableExists) with the broker's default
// max.message.bytes (about 1 MB), too small for the loop records that fold a large
// window. Before Goka checks them, this manager creates a missing one with Goka's
// settings (cleanup policy, retention, replication, the partition count Goka asks
// for, which is the input topics') plus max.message.bytes = MaxBatchBytes, and
// raises the limit of an existing one that is smaller (an incremental config
// change of that one key: it only lets larger batches in, and the topics belong to
// the processor group). Goka then checks partitions, replication, cleanup policy
// and retention as before, failing on a mismatch. Every other method is Goka's.
//
// With GokaOptions.CheckTopicsOnly it creates and changes nothing: a missing topic,
// or one whose settings differ in a way that matters, fails the start with every
// difference named (harmless drift is logged as a warning).
type gokaTopicManager struct {
	goka.TopicManager
	cl        *kgo.Client
	adm       *kadm.Client
	tmc       goka.TopicManagerConfig
	log       *slog.Logger
	checkOnly bool
}

// GeometryTopicSpec is the <group>-geometry topic of a window processor version
// (its window length and grace, one record): one partition, compacted.
func GeometryTopicSpec(group string, replication int16) TopicSpec {
	return TopicSpec{Name: group + "-geometry", Partitions: 1, Replication: max(replication, 1),
		Configs: map[string]string{ConfigCleanupPolicy: CleanupCompact}}
}

// GokaTopicSpecs are the topics Goka uses for the processor group: its
// <group>-table (compacted state) and <group>-loop stream, as the topic manager
// creates them, for operators who create topics themselves (`larkline topics
// print`). streamRetention 0 is DefaultStreamRetention.
func GokaTopicSpecs(group string, partitions int32, tableReplication, streamReplication int16, streamRetention time.Duration) []TopicSpec {
	if streamRetention == 0 {
		streamRetention = DefaultStreamRetention
	}
	return []TopicSpec{
		{Name: group + "-table", Partitions: partitions, Replication: tableReplication, Configs: map[string]string{
			ConfigCleanupPolicy: CleanupCompact, ConfigMaxMessageBytes: maxBatchBytesConfig,
		}, Purpose: "the Goka processor's state table (one value per chat), its changelog"},
		{Name: group + "-loop", Partitions: partitions, Replication: streamReplication, Configs: map[string]string{
			ConfigCleanupPolicy: CleanupDelete, ConfigRetentionMs: strconv.FormatInt(streamRetention.Milliseconds(), 10),
			ConfigMaxMessageBytes: maxBatchBytesConfig,
		}, Purpose: "the Goka processor's internal messages between keys of one chat"},
	}
}

func newGokaTopicManager(tm goka.TopicManager, g *Goka, brokers []string) (*gokaTopicManager, error) {
	opts := append(append([]kgo.Opt(nil), g.kopt...), kgo.SeedBrokers(brokers...), kgo.ClientID(g.id+"-topic-manager"))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		_ = tm.Close()
		return nil, fmt.Errorf("creating the goka topic manager's admin client: %w", err)
	}
	return &gokaTopicManager{TopicManager: tm, cl: cl, adm: kadm.NewClient(cl), tmc: *g.tmc, log: g.log, checkOnly: g.checkOnly}, nil
}

// EnsureTableExists makes sure the compacted group table has room for
// MaxBatchBytes, then lets Goka check it.
func (m *gokaTopicManager) EnsureTableExists(topic string, npar int) error {
	if err := m.ensureLimit(topic, npar, m.tmc.Table.Replication, map[string]string{
		ConfigCleanupPolicy: m.tmc.Table.CleanupPolicy,
	}); err != nil {
		return err
	}
	return m.TopicManager.EnsureTableExists(topic, npar)
}

// EnsureStreamExists makes sure the loop stream has room for MaxBatchBytes, then
// lets Goka check it.
func (m *gokaTopicManager) EnsureStreamExists(topic string, npar int) error {
	if err := m.ensureLimit(topic, npar, m.tmc.Stream.Replication, map[string]string{
		ConfigCleanupPolicy: m.tmc.Stream.CleanupPolicy,
		ConfigRetentionMs:   strconv.FormatInt(m.tmc.Stream.Retention.Milliseconds(), 10),
	}); err != nil {
		return err
	}
	return m.TopicManager.EnsureStreamExists(topic, npar)
}

func (m *gokaTopicManager) ensureLimit(topic string, npar, replication int, configs map[string]string) error {
	if npar < 1 || npar > 1<<20 || replication < 1 || replication > 32767 {
		return fmt.Errorf("goka topic %s: %d partitions, replication %d", topic, npar, replication)
	}
	configs[ConfigMaxMessageBytes] = maxBatchBytesConfig
	ctx, cancel := context.WithTimeout(context.Background(), GokaTopicTimeout)
	defer cancel()
	spec := TopicSpec{Name: topic, Partitions: int32(npar), Replication: int16(replication), Configs: configs}
	if m.checkOnly {
		rep, err := CheckTopics(ctx, m.adm, []TopicSpec{spec})
		if err != nil {
			return fmt.Errorf("goka topic %s: %w", topic, err)
		}
		for _, w := range rep.Warnings {
			m.log.Warn("goka topic differs harmlessly", "topic", topic, "field", w.Field, "want", w.Want, "got", w.Got)
		}
		if err := rep.Err(); err != nil {
			return fmt.Errorf("goka topic %s (topics are not managed: create or fix it, see larkline topics print): %w", topic, err)
		}
		return nil
	}
	rep, err := EnsureTopics(ctx, m.adm, []TopicSpec{spec})
	if err != nil {
		return fmt.Errorf("goka topic %s: %w", topic, err)
	}
	if len(rep.Created) > 0 {
		m.log.Info("goka topic created", "topic", topic, "partitions", npar, "replication", replication,
			ConfigMaxMessageBytes, MaxBatchBytes)
	}
	// Problems other than the limit are Goka's to judge (it fails on them next).
	for _, p := range rep.Problems {
		if p.Field != ConfigMaxMessageBytes {
			continue
		}
		value := maxBatchBytesConfig
		resp, err := m.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: ConfigMaxMessageBytes, Value: &value},
		}, topic)
		if err == nil {
			var r kadm.AlterConfigsResponse
			if r, err = resp.On(topic, nil); err == nil {
				err = r.Err
			}
		}
		if err == nil { // the first loop record may come right after: let the broker show it
			err = awaitConfigs(ctx, m.adm, topic, map[string]string{ConfigMaxMessageBytes: value})
		}
		if err != nil {
			return fmt.Errorf("goka topic %s: raising %s from %s to %s: %w", topic, ConfigMaxMessageBytes, p.Got, value, err)
		}
		m.log.Warn("goka topic's record limit raised", "topic", topic, "from", p.Got, "to", value)
	}
	return nil
}

// Close closes Goka's topic manager and the admin client.
func (m *gokaTopicManager) Close() error {
	err := m.TopicManager.Close()
	m.cl.Close()
	return err
}

var _ goka.TopicManager = (*gokaTopicManager)(nil)
