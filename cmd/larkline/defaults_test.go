package main

import (
	"fmt"
	"testing"

	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/connectors/lark/reconcile"
	pgsink "github.com/larkline/larkline/connectors/postgres"
	"github.com/larkline/larkline/connectors/workspaces"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/processors/retention"
	"github.com/larkline/larkline/processors/synthesis"
	"github.com/larkline/larkline/processors/synthesis/openai"
	"github.com/larkline/larkline/processors/windows"
	"github.com/larkline/larkline/schemas"
)

// config.Default() writes each default again as a literal (internal/config may not
// import the stages, D36): each key's default is the default of the stage option
// it sets. A group name is compared as the binary names it.
func TestConfigDefaultsAreTheStagesDefaults(t *testing.T) {
	group := func(role string) func(*config.Config) any {
		return func(c *config.Config) any { return groupName(c, role) }
	}
	tests := []struct {
		key   string
		stage any
		value func(*config.Config) any // the key's value as the stage gets it; nil: as it is
	}{
		{key: tl + "ingestionLookback", stage: reconcile.DefaultIngestionLookback},
		{key: tl + "synthesisScanInterval", stage: synthesis.DefaultScanInterval},
		{key: tl + "synthesisContextLookback", stage: synthesis.DefaultContextLookback},
		{key: tl + "synthesisStaleTimeout", stage: synthesis.DefaultStaleTimeout},
		{key: tl + "synthesisWindowMaxAttempts", stage: synthesis.DefaultMaxAttempts},
		{key: tl + "reconcileInterval", stage: reconcile.DefaultReconcileInterval},
		{key: tl + "reconcileOverlap", stage: reconcile.DefaultReconcileOverlap},
		{key: tl + "evidenceRefreshInterval", stage: reconcile.DefaultEvidenceRefreshInterval},
		{key: tl + "evidenceRefreshLookback", stage: reconcile.DefaultEvidenceRefreshLookback},
		{key: tl + "evidenceBatchLimit", stage: synthesis.DefaultEvidenceBatchLimit},
		{key: tl + "maxConcurrentSynthesis", stage: synthesis.DefaultMaxConcurrentSynthesis},
		{key: tl + "maxEstimatedTokensPerChunk", stage: synthesis.DefaultMaxEstimatedTokensPerChunk},
		{key: tl + "maxMessageTextBytes", stage: normalize.DefaultMaxTextBytes},
		{key: tl + "retention.mode", stage: retention.ModeRedact},
		{key: tl + "retention.interval", stage: retention.DefaultInterval},
		{key: "kafka.clientID", stage: kafka.DefaultClientID},
		{key: "kafka.groupPrefix", stage: windows.DefaultGroupPrefix},
		{key: "kafka.groupPrefix", stage: pgsink.DefaultGroup, value: group(groupSink)},
		{key: "kafka.groupPrefix", stage: synthesis.DefaultGroup, value: group(groupSynthesis)},
		{key: "kafka.groupPrefix", stage: workspaces.DefaultGroup, value: group(groupWorkspaces)},
		{key: "kafka.topics.evidence", stage: schemas.DefaultEvidenceTopic},
		{key: "kafka.topics.windowsClosed", stage: schemas.DefaultClosedWindowTopic},
		{key: "kafka.topics.checkpoints", stage: schemas.DefaultCheckpointTopic},
		{key: "kafka.topics.workspaces", stage: schemas.DefaultWorkspaceTopic},
		{key: "kafka.topics.deadLetter", stage: schemas.DefaultDeadLetterTopic},
		{key: "kafka.producer.linger", stage: kafka.DefaultLinger},
		{key: "kafka.producer.maxBufferedRecords", stage: kafka.DefaultMaxBufferedRecords},
		{key: "kafka.producer.compression", stage: kafka.DefaultCompression},
		{key: "kafka.consumer.sessionTimeout", stage: kafka.DefaultSessionTimeout},
		{key: "kafka.consumer.rebalanceTimeout", stage: kafka.DefaultRebalanceTimeout},
		{key: "kafka.consumer.fetchMaxWait", stage: kafka.DefaultFetchMaxWait},
		{key: "kafka.saramaVersion", stage: kafka.DefaultProtocolVersion},
		{key: "schemas.registry.timeout", stage: schemas.DefaultRegistryTimeout},
		{key: "lark.webhookPath", stage: ingest.DefaultWebhookPath},
		{key: "lark.maxTimestampSkew", stage: ingest.DefaultMaxTimestampSkew},
		{key: "lark.api.requestsPerSecond", stage: reconcile.DefaultRequestsPerSecond},
		{key: "lark.api.burst", stage: reconcile.DefaultBurst},
		{key: "lark.api.maxConcurrentChats", stage: reconcile.DefaultMaxConcurrentChats},
		{key: "lark.api.maxPagesPerRun", stage: reconcile.DefaultMaxPagesPerRun},
		{key: "lark.api.pageSize", stage: reconcile.DefaultPageSize},
		{key: "lark.api.maxRetries", stage: reconcile.DefaultMaxRetries},
		{key: "lark.api.maxBackoff", stage: reconcile.DefaultMaxBackoff},
		{key: "synthesis.evidenceWait", stage: synthesis.DefaultEvidenceWait},
		{key: "synthesis.openai.timeout", stage: openai.DefaultTimeout},
		{key: "synthesis.openai.maxRetries", stage: openai.DefaultMaxRetries},
		{key: "synthesis.openai.maxOutputTokens", stage: openai.DefaultMaxOutputTokens},
		// the prompts the client sends are the ones its default names (D40)
		{key: "synthesis.promptVersion", stage: openai.DefaultPromptVersion},
		{key: "windows.oversizedVersions", stage: windows.DefaultOversizedVersions},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.key, "=", tt.stage), func(t *testing.T) {
			c := config.Default()
			v, ok := configField(c, tt.key)
			if !ok {
				t.Fatalf("%s is not a configuration key", tt.key)
			}
			got := v.Interface()
			if tt.value != nil {
				got = tt.value(c)
			}
			// the two are of different types (config.Compression, kafka.Compression):
			// compare them as written
			if fmt.Sprint(got) != fmt.Sprint(tt.stage) {
				t.Errorf("config.Default() gives %s %v, the stage's default is %v", tt.key, got, tt.stage)
			}
		})
	}
}

// TestZeroIsNoneWhereTheKeySaysSo: a key whose 0 means none (no retries, send at
// once, never flag) is accepted at 0 by the file and reaches its stage as 0, a set
// pointer; the stage's default (nil) must not take its place (D33, D40).
func TestZeroIsNoneWhereTheKeySaysSo(t *testing.T) {
	tests := []struct {
		key  string
		zero func(*config.Config)
		got  func(*config.Config) *int64 // the stage's value; nil: the stage's default
	}{
		{key: "lark.api.maxRetries", zero: func(c *config.Config) { c.Lark.API.MaxRetries = 0 },
			got: func(c *config.Config) *int64 { return int64Of(reconcileOptions(c).opts.MaxRetries) }},
		{key: "synthesis.openai.maxRetries", zero: func(c *config.Config) { c.Synthesis.OpenAI.MaxRetries = 0 },
			got: func(c *config.Config) *int64 { return int64Of(openaiOptions(c).opts.MaxRetries) }},
		{key: "kafka.producer.linger", zero: func(c *config.Config) { c.Kafka.Producer.Linger = 0 },
			got: func(c *config.Config) *int64 { return int64Of(kafkaOptions(c, "").opts.Producer.Linger) }},
		{key: "windows.oversizedVersions", zero: func(c *config.Config) { c.Windows.OversizedVersions = 0 },
			got: func(c *config.Config) *int64 {
				return int64Of(windowsOptions(c, c.Windows.ProcessorVersion).opts.OversizedVersions)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			c := modelDeployment()
			c.Synthesis.Synthesizer, c.Synthesis.OpenAI.Model = config.SynthesizerOpenAI, "m"
			tt.zero(c)
			if err := validateConfig(c); err != nil {
				t.Fatalf("%s: 0 refused: %v", tt.key, err)
			}
			switch got := tt.got(c); {
			case got == nil:
				t.Errorf("%s: 0 reaches the stage as unset, which takes the stage's default", tt.key)
			case *got != 0:
				t.Errorf("%s: 0 reaches the stage as %d", tt.key, *got)
			}
		})
	}
}

func int64Of[T ~int | ~int64](p *T) *int64 {
	if p == nil {
		return nil
	}
	return new(int64(*p))
}
