package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/config/configtest"
	"github.com/larkline/larkline/internal/lagexport"
)

// Each stage's rules are its own (Options.Check); these cases say the
// configuration reports them under the key that set the option, with the key's
// value and source, together with the file's own problems.
func TestValidateConfigReportsStageRulesUnderTheirKeys(t *testing.T) {
	timeline := func(c *config.Config) *config.LarkTimeline { return &c.Services.Workspace.Timeline.Lark }
	openAIReady := func(c *config.Config) {
		c.Synthesis.Synthesizer = config.SynthesizerOpenAI
		c.Synthesis.OpenAI.BaseURL = "https://llm.example/v1"
		c.Synthesis.OpenAI.Model = "m"
		c.Synthesis.OpenAI.APIKey = "k"
	}
	type want = configtest.Want
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   []want
	}{
		{name: "defaults are valid", mutate: func(*config.Config) {}},
		{name: "registry bearer and basic auth", mutate: func(c *config.Config) {
			c.Schemas.Registry.URL, c.Schemas.Registry.Username, c.Schemas.Registry.BearerToken = "https://sr", "u", "t"
		}, want: []want{{"schemas.registry.bearerToken", "exclusive with basic auth"}}},
		{name: "registry TLS on http", mutate: func(c *config.Config) {
			c.Schemas.Registry.URL, c.Schemas.Registry.TLS.ServerName = "http://sr", "sr.internal"
		}, want: []want{{"schemas.registry.tls.serverName", "not https"}}},
		{name: "registry client certificate without key", mutate: func(c *config.Config) {
			c.Schemas.Registry.URL, c.Schemas.Registry.TLS.CertFile = "https://sr", "/c.pem"
		}, want: []want{{"schemas.registry.tls.certFile", "set together"}}},
		{name: "synthesisWindow below 1m", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = 30 * time.Second },
			want: []want{{tl + "synthesisWindow", "at least 1m"}}},
		{name: "synthesisWindow 7m does not divide an hour", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = 7 * time.Minute },
			want: []want{{tl + "synthesisWindow", "must divide an hour evenly"}}},
		{name: "synthesisWindow 2h does not divide an hour", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = 2 * time.Hour },
			want: []want{{tl + "synthesisWindow", "must divide an hour evenly"}}},
		{name: "synthesisWindow 15m is fine", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = 15 * time.Minute }},
		{name: "synthesisWindow 1h is fine", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = time.Hour }},
		{name: "close grace negative", mutate: func(c *config.Config) { timeline(c).SynthesisWindowCloseGrace = -time.Second },
			want: []want{{tl + "synthesisWindowCloseGrace", "must not be negative"}}},
		{name: "close grace equal to window", mutate: func(c *config.Config) { timeline(c).SynthesisWindowCloseGrace = 10 * time.Minute },
			want: []want{{tl + "synthesisWindowCloseGrace", "shorter than the window"}}},
		{name: "close grace not compared with a bad window", mutate: func(c *config.Config) {
			timeline(c).SynthesisWindow = 7 * time.Minute
			timeline(c).SynthesisWindowCloseGrace = 8 * time.Minute
		}, want: []want{{tl + "synthesisWindow", "divide an hour"}}},
		{name: "context lookback negative", mutate: func(c *config.Config) { timeline(c).SynthesisContextLookback = -time.Minute },
			want: []want{{tl + "synthesisContextLookback", "must be positive"}}},
		{name: "evidence wait over a day", mutate: func(c *config.Config) { c.Synthesis.EvidenceWait = 25 * time.Hour },
			want: []want{{"synthesis.evidenceWait", "at most 24h"}}},
		{name: "stale timeout under the heartbeat's floor", mutate: func(c *config.Config) { timeline(c).SynthesisStaleTimeout = 2 * time.Second },
			want: []want{{tl + "synthesisStaleTimeout", "at least 3s"}}},
		{name: "max attempts above 100", mutate: func(c *config.Config) { timeline(c).SynthesisWindowMaxAttempts = 101 },
			want: []want{{tl + "synthesisWindowMaxAttempts", "between 1 and 100"}}},
		{name: "reconcile interval within the settle delay", mutate: func(c *config.Config) { timeline(c).ReconcileInterval = 5 * time.Second },
			want: []want{{tl + "reconcileInterval", "longer than the settle delay"}}},
		{name: "reconcile overlap negative", mutate: func(c *config.Config) { timeline(c).ReconcileOverlap = -time.Minute },
			want: []want{{tl + "reconcileOverlap", "must not be negative"}}},
		{name: "refresh lookback beyond ingestion lookback", mutate: func(c *config.Config) { timeline(c).EvidenceRefreshLookback = 100 * time.Hour },
			want: []want{{tl + "evidenceRefreshLookback", "must not exceed IngestionLookback (72h"}}},
		{name: "refresh lookback below reconcile overlap", mutate: func(c *config.Config) { timeline(c).EvidenceRefreshLookback = 5 * time.Minute },
			want: []want{{tl + "evidenceRefreshLookback", "at least ReconcileOverlap (10m"}}},
		{name: "retention zero", mutate: func(c *config.Config) { timeline(c).Retention.EvidenceRetention = 0 },
			want: []want{{tl + "retention.evidenceRetention", "must be positive"}}},
		{name: "retention mode unknown", mutate: func(c *config.Config) { timeline(c).Retention.Mode = "shred" },
			want: []want{{tl + "retention.mode", "one of redact, delete"}}},
		{name: "retention needs acks all", mutate: func(c *config.Config) { c.Kafka.Producer.Acks, c.Kafka.Producer.Idempotent = config.AcksLeader, false },
			want: []want{{"kafka.producer.acks", "retention publishes before it changes the database"}}},
		{name: "requests per second above Lark's limit", mutate: func(c *config.Config) { c.Lark.API.RequestsPerSecond = 50.5 },
			want: []want{{"lark.api.requestsPerSecond", "at most 50"}}},
		{name: "fractional rate is fine", mutate: func(c *config.Config) { c.Lark.API.RequestsPerSecond = 0.5 }},
		{name: "page size 51", mutate: func(c *config.Config) { c.Lark.API.PageSize = 51 },
			want: []want{{"lark.api.pageSize", "between 1 and 50: Lark's message list accepts page_size 1-50"}}},
		{name: "processor version malformed", mutate: func(c *config.Config) { c.Windows.ProcessorVersion = "v 1" },
			want: []want{{"windows.processorVersion", "processor version"}}},
		{name: "no brokers", mutate: func(c *config.Config) { c.Kafka.Brokers = nil },
			want: []want{{"kafka.brokers", "at least one broker"}}},
		{name: "broker without port", mutate: func(c *config.Config) { c.Kafka.Brokers = []string{"a:9092", "kafka"} },
			want: []want{{"kafka.brokers", `"kafka" must be host:port`}}},
		{name: "broker without host", mutate: func(c *config.Config) { c.Kafka.Brokers = []string{":9092"} },
			want: []want{{"kafka.brokers", "must name a host"}}},
		{name: "broker port zero", mutate: func(c *config.Config) { c.Kafka.Brokers = []string{"k:0"} },
			want: []want{{"kafka.brokers", "port between 1 and 65535"}}},
		{name: "broker port too large", mutate: func(c *config.Config) { c.Kafka.Brokers = []string{"k:70000"} },
			want: []want{{"kafka.brokers", "port between 1 and 65535"}}},
		{name: "client id with space", mutate: func(c *config.Config) { c.Kafka.ClientID = "lark line" },
			want: []want{{"kafka.clientID", "has character ' '"}}},
		{name: "acks unknown", mutate: func(c *config.Config) { c.Kafka.Producer.Acks = "most" },
			want: []want{{"kafka.producer.acks", "one of all, leader, none"}}},
		{name: "acks leader while idempotent", mutate: func(c *config.Config) { c.Kafka.Producer.Acks = config.AcksLeader },
			want: []want{{"kafka.producer.acks", "must be all while the producer is idempotent"}}},
		{name: "linger above 1m", mutate: func(c *config.Config) { c.Kafka.Producer.Linger = 2 * time.Minute },
			want: []want{{"kafka.producer.linger", "at most 1m"}}},
		{name: "compression unknown", mutate: func(c *config.Config) { c.Kafka.Producer.Compression = "brotli" },
			want: []want{{"kafka.producer.compression", "one of none, gzip, snappy, lz4, zstd"}}},
		{name: "session timeout below broker minimum", mutate: func(c *config.Config) { c.Kafka.Consumer.SessionTimeout = time.Second },
			want: []want{{"kafka.consumer.sessionTimeout", "between 6s and 30m"}}},
		{name: "session timeout above broker maximum", mutate: func(c *config.Config) { c.Kafka.Consumer.SessionTimeout = 31 * time.Minute },
			want: []want{{"kafka.consumer.sessionTimeout", "between 6s and 30m"}}},
		{name: "fetch max wait 1ms", mutate: func(c *config.Config) { c.Kafka.Consumer.FetchMaxWait = time.Millisecond },
			want: []want{{"kafka.consumer.fetchMaxWait", "between 10ms and 1m"}}},
		{name: "sarama version unparsable", mutate: func(c *config.Config) { c.Kafka.SaramaVersion = "3.6" },
			want: []want{{"kafka.saramaVersion", "Kafka version such as 3.6.0"}}},
		{name: "sarama version words", mutate: func(c *config.Config) { c.Kafka.SaramaVersion = "latest" },
			want: []want{{"kafka.saramaVersion", "Kafka version such as 3.6.0"}}},
		{name: "sarama version 2.0 too old for Kafka 4", mutate: func(c *config.Config) { c.Kafka.SaramaVersion = "2.0.0" },
			want: []want{{"kafka.saramaVersion", "at least 2.1.0"}}},
		{name: "sarama version 0.11 too old", mutate: func(c *config.Config) { c.Kafka.SaramaVersion = "0.11.0.2" },
			want: []want{{"kafka.saramaVersion", "at least 2.1.0"}}},
		{name: "tls file while tls off", mutate: func(c *config.Config) { c.Kafka.TLS.CAFile = "/ca.pem" },
			want: []want{{"kafka.tls.caFile", "TLS is not enabled"}}},
		{name: "tls cert without key", mutate: func(c *config.Config) { c.Kafka.TLS.Enabled, c.Kafka.TLS.CertFile = true, "/c.pem" },
			want: []want{{"kafka.tls.keyFile", "together with the certificate file"}}},
		{name: "tls key without cert", mutate: func(c *config.Config) { c.Kafka.TLS.Enabled, c.Kafka.TLS.KeyFile = true, "/k.pem" },
			want: []want{{"kafka.tls.certFile", "together with the key file"}}},
		{name: "sasl mechanism unknown", mutate: func(c *config.Config) { c.Kafka.SASL.Mechanism = "gssapi" },
			want: []want{{"kafka.sasl.mechanism", "must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"}}},
		{name: "sasl credentials without mechanism", mutate: func(c *config.Config) { c.Kafka.SASL.Username, c.Kafka.SASL.Password = "u", "p" },
			want: []want{{"kafka.sasl.username", "mechanism is empty"}, {"kafka.sasl.password", "mechanism is empty"}}},
		{name: "message text bytes 1 MiB", mutate: func(c *config.Config) { timeline(c).MaxMessageTextBytes = 1 << 20 },
			want: []want{{tl + "maxMessageTextBytes", "1 MiB"}}},
		{name: "timestamp skew above 1h", mutate: func(c *config.Config) { c.Lark.MaxTimestampSkew = 2 * time.Hour },
			want: []want{{"lark.maxTimestampSkew", "at most 1h0m0s: a larger window lets replayed callbacks through"}}},
		{name: "openai base URL malformed", mutate: func(c *config.Config) {
			openAIReady(c)
			c.Synthesis.OpenAI.BaseURL = "llm.example/v1"
		}, want: []want{{"synthesis.openai.baseURL", "absolute http:// or https:// URL"}}},
		{name: "openai retries above 10", mutate: func(c *config.Config) { openAIReady(c); c.Synthesis.OpenAI.MaxRetries = 11 },
			want: []want{{"synthesis.openai.maxRetries", "between 0 and 10"}}},
		{name: "openai's rules are not applied while the synthesizer is rules", mutate: func(c *config.Config) { c.Synthesis.OpenAI.MaxRetries = 11 }},
		{name: "openai ready is fine", mutate: func(c *config.Config) { openAIReady(c) }},
		{name: "lag-exporter series without a cluster name", mutate: func(c *config.Config) {
			c.Lag.KafkaLagExporterMetrics, c.Lag.ClusterName = true, " "
		}, want: []want{{"lag.clusterName", "need a cluster name"}}},
		{name: "a blank lag group", mutate: func(c *config.Config) { c.Lag.Groups = []string{"billing", " "} },
			want: []want{{"lag.groups", "must not be blank"}}},
		{name: "too many lag groups", mutate: func(c *config.Config) {
			for i := range lagexport.MaxGroups {
				c.Lag.Groups = append(c.Lag.Groups, fmt.Sprintf("team-%d", i))
			}
		}, want: []want{{"lag.groups", "at most 64 groups"}}},
		{name: "a cluster name is not needed without the series", mutate: func(c *config.Config) { c.Lag.ClusterName = "" }},
		{name: "a key the file refused is not reported again by a stage", mutate: func(c *config.Config) { c.Kafka.Topics.WindowsClosed = "" },
			want: []want{{"kafka.topics.windowsClosed", "Kafka topic name"}}},
		{name: "all problems at once, the file's and the stages'", mutate: func(c *config.Config) {
			timeline(c).SynthesisWindow = 7 * time.Minute
			c.Kafka.Partitions = 0
			c.Lark.API.PageSize = 100
			c.Log.Format = "xml"
		}, want: []want{
			{tl + "synthesisWindow", "divide"},
			{"kafka.partitions", "at least 1"},
			{"lark.api.pageSize", "between 1 and 50"},
			{"log.format", "json or text"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.mutate(c)
			configtest.CheckProblems(t, validateConfig(c), tt.want)
		})
	}
}

// A stage's problem names where the key's value came from, and is reported by
// the load together with the file's own problems.
func TestLoadConfigNamesTheSourceOfAStageProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "larkline.yaml")
	yaml := "kafka:\n  partitions: 0\nlark:\n  api:\n    pageSize: 60\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW", "7m")
	_, err := loadConfig(path)
	var cerr *config.Error
	if !errors.As(err, &cerr) {
		t.Fatalf("loadConfig = %v, want a *config.Error", err)
	}
	bySource := map[string]string{}
	for _, p := range cerr.Problems {
		bySource[p.Field] = fmt.Sprint(p.Source, " ", p.Value)
	}
	for key, want := range map[string]string{
		"kafka.partitions":     path + ":2 0",
		"lark.api.pageSize":    path + ":5 60",
		tl + "synthesisWindow": "env LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW \"7m\"",
	} {
		if got := bySource[key]; got != want {
			t.Errorf("%s: source and value %q, want %q\n%v", key, got, want, err)
		}
	}
}

func TestValidateConfigNeverPrintsSecrets(t *testing.T) {
	c := config.Default()
	c.Kafka.SASL.Password = "hunter2-sasl" // without a mechanism: internal/kafka's problem
	c.Postgres.DSN = "postgres://u:hunter2-pg@db/x"
	c.Synthesis.OpenAI.APIKey = "hunter2-key"
	c.Synthesis.Synthesizer = config.SynthesizerOpenAI // baseURL, model missing
	err := validateConfig(c)
	if err == nil {
		t.Fatal("want problems")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("validation error leaks a secret: %v", err)
	}
	if !strings.Contains(err.Error(), `kafka.sasl.password = [REDACTED]`) {
		t.Errorf("a set secret should show as [REDACTED]: %v", err)
	}
}

// A role is built from its options (roleOptions), never from the configuration:
// no function of the role files but the process's own start reads a *config.Config.
func TestRolesReadNoConfiguration(t *testing.T) {
	process := map[string]bool{"runRoles": true, "serveRoles": true, "startRoles": true, "logRetentionDecision": true}
	fset := token.NewFileSet()
	for _, name := range []string{"roles.go", "roles_lark.go", "roles_sink.go", "versions_role.go"} {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || process[fn.Name.Name] {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "config" && sel.Sel.Name == "Config" {
						t.Errorf("%s: %s takes the configuration; give it its options (roleOptions)", fset.Position(sel.Pos()), fn.Name.Name)
					}
				}
				return true
			})
		}
	}
}

// The options a role is built from are the ones the stage checks use: the
// mapping is one.
func TestRoleOptionsAreTheCheckedOptions(t *testing.T) {
	cfg := config.Default()
	l := &cfg.Services.Workspace.Timeline.Lark
	l.SynthesisWindow, l.ReconcileInterval, cfg.Kafka.ClientID = 15*time.Minute, 7*time.Minute, "lk"
	cfg.Synthesis.Synthesizer, cfg.Synthesis.OpenAI.MaxRetries, cfg.Synthesis.OpenAI.Timeout = config.SynthesizerOpenAI, 0, 20*time.Second
	o := newRoleOptions(cfg)
	if o.windows.Window != 15*time.Minute || o.reconcile.Window != 15*time.Minute || o.reconcile.ReconcileInterval != 7*time.Minute {
		t.Errorf("windows %s, reconcile %s every %s", o.windows.Window, o.reconcile.Window, o.reconcile.ReconcileInterval)
	}
	if got := o.kafkaFor("sink").ClientID; got != "lk-sink" || o.sink.Kafka.ClientID != got {
		t.Errorf("client id %q, the sink's %q; want lk-sink", got, o.sink.Kafka.ClientID)
	}
	// no retries: one attempt of 20s, plus the margin
	if got := o.synthesis.ChunkTimeout; got != 30*time.Second {
		t.Errorf("chunk timeout %s, want 30s", got)
	}
}
