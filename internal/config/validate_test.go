package config_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/config/configtest"
	"github.com/larkline/larkline/internal/options"
)

// want is one expected problem: the key path and a fragment of the message.
type want = configtest.Want

const tl = "services.workspace.timeline.lark."

const (
	hashA = "9ed48c47a14f63ffcefa8f13d71867c282b53ec1bc6118d598411c31d133e9b7"
	hashB = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
)

func timeline(c *config.Config) *config.LarkTimeline { return &c.Services.Workspace.Timeline.Lark }

// webhookReady turns on event ingestion with the secrets it needs.
func webhookReady(c *config.Config) {
	l := timeline(c)
	l.Enabled, l.EventIngestionEnabled = true, true
	c.Lark.VerificationToken, c.Lark.EncryptKey = "vt", "ek"
}

func openAIReady(c *config.Config) {
	c.Synthesis.Synthesizer = config.SynthesizerOpenAI
	c.Synthesis.OpenAI.BaseURL = "https://llm.example/v1"
	c.Synthesis.OpenAI.Model = "m"
	c.Synthesis.OpenAI.APIKey = "k"
}

// TestValidate covers the file's own rules. The stages' rules (synthesisWindow
// divides an hour, pageSize is at most 50, ...) are their Options.Check, reported
// under these keys by cmd/larkline (TestValidateConfigReportsStageRulesUnderTheirKeys).
func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   []want
	}{
		{name: "defaults are valid", mutate: func(*config.Config) {}},
		{name: "windows.oversizedVersions negative", mutate: func(c *config.Config) { c.Windows.OversizedVersions = -1 },
			want: []want{{"windows.oversizedVersions", "must be 0 (never flag)"}}},
		{name: "windows.oversizedVersions 0 never flags", mutate: func(c *config.Config) { c.Windows.OversizedVersions = 0 }},

		// services.workspace.timeline.lark
		{name: "ingestionLookback zero", mutate: func(c *config.Config) { timeline(c).IngestionLookback = 0 },
			want: []want{{tl + "ingestionLookback", "must be positive"}}},
		{name: "ingestionLookback above 72h", mutate: func(c *config.Config) { timeline(c).IngestionLookback = 73 * time.Hour },
			want: []want{{tl + "ingestionLookback", "at most 72h"}}},
		{name: "ingestionLookback shorter is fine", mutate: func(c *config.Config) {
			timeline(c).IngestionLookback = 24 * time.Hour
		}},
		{name: "synthesisScanInterval zero", mutate: func(c *config.Config) { timeline(c).SynthesisScanInterval = 0 },
			want: []want{{tl + "synthesisScanInterval", "must be positive"}}},
		{name: "synthesisWindow 15m and 1h are fine", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = 15 * time.Minute }},
		{name: "synthesisWindow 1h is fine", mutate: func(c *config.Config) { timeline(c).SynthesisWindow = time.Hour }},
		{name: "close grace zero is fine", mutate: func(c *config.Config) { timeline(c).SynthesisWindowCloseGrace = 0 }},
		{name: "stale timeout zero", mutate: func(c *config.Config) { timeline(c).SynthesisStaleTimeout = 0 },
			want: []want{{tl + "synthesisStaleTimeout", "must be positive"}}},
		{name: "evidence wait zero", mutate: func(c *config.Config) { c.Synthesis.EvidenceWait = 0 },
			want: []want{{"synthesis.evidenceWait", "must be positive"}}},
		{name: "stale timeout shorter than the model timeout (the heartbeat keeps a slow call's claim)", mutate: func(c *config.Config) {
			openAIReady(c)
			timeline(c).SynthesisStaleTimeout = 30 * time.Second
		}},
		{name: "max attempts zero", mutate: func(c *config.Config) { timeline(c).SynthesisWindowMaxAttempts = 0 },
			want: []want{{tl + "synthesisWindowMaxAttempts", "at least 1"}}},
		{name: "reconcile interval zero", mutate: func(c *config.Config) { timeline(c).ReconcileInterval = 0 },
			want: []want{{tl + "reconcileInterval", "must be positive"}}},
		{name: "refresh interval zero", mutate: func(c *config.Config) { timeline(c).EvidenceRefreshInterval = 0 },
			want: []want{{tl + "evidenceRefreshInterval", "at least 1s"}}},
		{name: "refresh lookback zero", mutate: func(c *config.Config) { timeline(c).EvidenceRefreshLookback = 0 },
			want: []want{{tl + "evidenceRefreshLookback", "must be positive"}}},
		{name: "evidence batch limit zero", mutate: func(c *config.Config) { timeline(c).EvidenceBatchLimit = 0 },
			want: []want{{tl + "evidenceBatchLimit", "at least 1"}}},
		{name: "max concurrent synthesis zero", mutate: func(c *config.Config) { timeline(c).MaxConcurrentSynthesis = 0 },
			want: []want{{tl + "maxConcurrentSynthesis", "at least 1"}}},
		{name: "environment empty", mutate: func(c *config.Config) { timeline(c).Environment = "" },
			want: []want{{tl + "environment", "lower-case"}}},
		{name: "environment upper case", mutate: func(c *config.Config) { timeline(c).Environment = "Prod" },
			want: []want{{tl + "environment", "lower-case"}}},
		{name: "workspace type listed twice", mutate: func(c *config.Config) { timeline(c).WorkspaceTypes = []string{"incident", "incident"} },
			want: []want{{tl + "workspaceTypes[1]", "listed twice"}}},
		{name: "workspace type malformed", mutate: func(c *config.Config) { timeline(c).WorkspaceTypes = []string{"incident", "Big Outage"} },
			want: []want{{tl + "workspaceTypes[1]", "lower-case"}}},
		{name: "no workspace types while enabled", mutate: func(c *config.Config) {
			timeline(c).Enabled = true
			timeline(c).WorkspaceTypes = nil
		}, want: []want{{tl + "workspaceTypes", "at least one workspace type"}}},
		{name: "no workspace types while disabled is fine", mutate: func(c *config.Config) { timeline(c).WorkspaceTypes = nil }},
		{name: "token budget zero", mutate: func(c *config.Config) { timeline(c).MaxEstimatedTokensPerChunk = 0 },
			want: []want{{tl + "maxEstimatedTokensPerChunk", "at least 1"}}},
		{name: "message text bytes zero", mutate: func(c *config.Config) { timeline(c).MaxMessageTextBytes = 0 },
			want: []want{{tl + "maxMessageTextBytes", "at least 1"}}},
		{name: "retention shorter than ingestion lookback", mutate: func(c *config.Config) { timeline(c).Retention.EvidenceRetention = 24 * time.Hour },
			want: []want{{tl + "retention.evidenceRetention", "at least ingestionLookback (72h)"}}},
		{name: "retention mode delete is fine", mutate: func(c *config.Config) { timeline(c).Retention.Mode = config.RetentionDelete }},
		{name: "retention interval zero", mutate: func(c *config.Config) { timeline(c).Retention.Interval = 0 },
			want: []want{{tl + "retention.interval", "must be positive"}}},

		// kafka
		{name: "client id empty", mutate: func(c *config.Config) { c.Kafka.ClientID = "" },
			want: []want{{"kafka.clientID", "must be set"}}},
		{name: "rebalance timeout zero", mutate: func(c *config.Config) { c.Kafka.Consumer.RebalanceTimeout = 0 },
			want: []want{{"kafka.consumer.rebalanceTimeout", "must be positive"}}},
		{name: "group prefix empty", mutate: func(c *config.Config) { c.Kafka.GroupPrefix = "" },
			want: []want{{"kafka.groupPrefix", "1-100"}}},
		{name: "group prefix with slash", mutate: func(c *config.Config) { c.Kafka.GroupPrefix = "team/larkline" },
			want: []want{{"kafka.groupPrefix", "1-100"}}},
		{name: "topic with space", mutate: func(c *config.Config) { c.Kafka.Topics.Checkpoints = "lark checkpoints" },
			want: []want{{"kafka.topics.checkpoints", "Kafka topic name"}}},
		{name: "topic dot-dot", mutate: func(c *config.Config) { c.Kafka.Topics.DeadLetter = ".." },
			want: []want{{"kafka.topics.deadLetter", "Kafka topic name"}}},
		{name: "topic reused", mutate: func(c *config.Config) { c.Kafka.Topics.WindowsClosed = c.Kafka.Topics.Evidence },
			want: []want{{"kafka.topics.windowsClosed", "must differ from kafka.topics.evidence"}}},
		{name: "partitions zero", mutate: func(c *config.Config) { c.Kafka.Partitions = 0 },
			want: []want{{"kafka.partitions", "at least 1"}}},
		{name: "replication zero", mutate: func(c *config.Config) { c.Kafka.ReplicationFactor = 0 },
			want: []want{{"kafka.replicationFactor", "at least 1"}}},
		{name: "acks leader without idempotence is fine", mutate: func(c *config.Config) {
			c.Kafka.Producer.Acks, c.Kafka.Producer.Idempotent = config.AcksLeader, false
		}},
		{name: "linger negative", mutate: func(c *config.Config) { c.Kafka.Producer.Linger = -time.Millisecond },
			want: []want{{"kafka.producer.linger", "must not be negative"}}},
		{name: "linger zero is fine", mutate: func(c *config.Config) { c.Kafka.Producer.Linger = 0 }},
		{name: "buffered records zero", mutate: func(c *config.Config) { c.Kafka.Producer.MaxBufferedRecords = 0 },
			want: []want{{"kafka.producer.maxBufferedRecords", "at least 1"}}},
		{name: "sarama version 2.1.0 and 4.1.0 are fine", mutate: func(c *config.Config) { c.Kafka.SaramaVersion = "2.1.0" }},
		{name: "sarama version 4.1.0 is fine", mutate: func(c *config.Config) { c.Kafka.SaramaVersion = "4.1.0" }},
		{name: "schema registry not a URL", mutate: func(c *config.Config) { c.Schemas.Registry.URL = "registry:8081" },
			want: []want{{"schemas.registry.url", "absolute http:// or https:// URL"}}},
		{name: "schema registry with credentials", mutate: func(c *config.Config) { c.Schemas.Registry.URL = "https://u:p@registry:8081" },
			want: []want{{"schemas.registry.url", "must not carry credentials"}}},
		{name: "schema registry URL is fine", mutate: func(c *config.Config) { c.Schemas.Registry.URL = "http://registry:8081" }},
		{name: "tls with system roots is fine", mutate: func(c *config.Config) { c.Kafka.TLS.Enabled = true }},
		{name: "sasl without credentials", mutate: func(c *config.Config) { c.Kafka.SASL.Mechanism = config.SASLScramSHA512 },
			want: []want{{"kafka.sasl.username", "because kafka.sasl.mechanism is scram-sha-512"}, {"kafka.sasl.password", "kafka.sasl.passwordFile"}}},
		{name: "sasl plain is fine", mutate: func(c *config.Config) {
			c.Kafka.SASL = config.SASL{Mechanism: config.SASLPlain, Username: "u", Password: "p"}
		}},

		// postgres
		{name: "max conns zero", mutate: func(c *config.Config) { c.Postgres.MaxConns = 0 },
			want: []want{{"postgres.maxConns", "at least 1"}}},
		{name: "connect timeout zero", mutate: func(c *config.Config) { c.Postgres.ConnectTimeout = 0 },
			want: []want{{"postgres.connectTimeout", "must be positive"}}},

		// lark
		{name: "mode unknown", mutate: func(c *config.Config) { c.Lark.Mode = "poll" },
			want: []want{{"lark.mode", "one of webhook, longconn"}}},
		{name: "app id without cli_", mutate: func(c *config.Config) { c.Lark.AppID = "app123" },
			want: []want{{"lark.appID", "starts with cli_"}}},
		{name: "bot open id without ou_", mutate: func(c *config.Config) { c.Lark.BotOpenID = "u_1" },
			want: []want{{"lark.botOpenID", "starts with ou_"}}},
		{name: "open base URL empty", mutate: func(c *config.Config) { c.Lark.OpenBaseURL = "" },
			want: []want{{"lark.openBaseURL", "must be set"}}},
		{name: "open base URL without scheme", mutate: func(c *config.Config) { c.Lark.OpenBaseURL = "open.larksuite.com" },
			want: []want{{"lark.openBaseURL", "absolute http:// or https:// URL"}}},
		{name: "open base URL with path", mutate: func(c *config.Config) { c.Lark.OpenBaseURL = "https://open.larksuite.com/open-apis" },
			want: []want{{"lark.openBaseURL", "scheme and host only"}}},
		{name: "feishu base URL is fine", mutate: func(c *config.Config) { c.Lark.OpenBaseURL = config.FeishuOpenBaseURL + "/" }},
		{name: "local larktest URL is fine", mutate: func(c *config.Config) { c.Lark.OpenBaseURL = "http://127.0.0.1:39111" }},
		{name: "webhook path relative", mutate: func(c *config.Config) { c.Lark.WebhookPath = "lark/events" },
			want: []want{{"lark.webhookPath", "starting with /"}}},
		{name: "webhook path wildcard", mutate: func(c *config.Config) { c.Lark.WebhookPath = "/lark/{x}" },
			want: []want{{"lark.webhookPath", "wildcards"}}},
		{name: "webhook path on ops endpoint", mutate: func(c *config.Config) { c.Lark.WebhookPath = "/healthz" },
			want: []want{{"lark.webhookPath", "ops endpoints"}}},
		{name: "timestamp skew zero", mutate: func(c *config.Config) { c.Lark.MaxTimestampSkew = 0 },
			want: []want{{"lark.maxTimestampSkew", "must be positive"}}},
		{name: "requests per second zero", mutate: func(c *config.Config) { c.Lark.API.RequestsPerSecond = 0 },
			want: []want{{"lark.api.requestsPerSecond", "must be above 0"}}},
		{name: "fractional rate is fine", mutate: func(c *config.Config) { c.Lark.API.RequestsPerSecond = 0.5 }},
		{name: "burst zero", mutate: func(c *config.Config) { c.Lark.API.Burst = 0 },
			want: []want{{"lark.api.burst", "at least 1"}}},
		{name: "concurrent chats zero", mutate: func(c *config.Config) { c.Lark.API.MaxConcurrentChats = 0 },
			want: []want{{"lark.api.maxConcurrentChats", "at least 1"}}},
		{name: "pages per run zero", mutate: func(c *config.Config) { c.Lark.API.MaxPagesPerRun = 0 },
			want: []want{{"lark.api.maxPagesPerRun", "at least 1"}}},
		{name: "page size zero", mutate: func(c *config.Config) { c.Lark.API.PageSize = 0 },
			want: []want{{"lark.api.pageSize", "at least 1"}}},
		{name: "page size 1 is fine", mutate: func(c *config.Config) { c.Lark.API.PageSize = 1 }},
		{name: "retries negative", mutate: func(c *config.Config) { c.Lark.API.MaxRetries = -1 },
			want: []want{{"lark.api.maxRetries", "at least 0"}}},
		{name: "backoff zero", mutate: func(c *config.Config) { c.Lark.API.MaxBackoff = 0 },
			want: []want{{"lark.api.maxBackoff", "must be positive"}}},

		// http
		{name: "listen without port", mutate: func(c *config.Config) { c.HTTP.Listen = "8080" },
			want: []want{{"http.listen", "host:port"}}},
		{name: "listen port too large", mutate: func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:99999" },
			want: []want{{"http.listen", "port between 0 and 65535"}}},
		{name: "listen on any port of all interfaces is fine", mutate: func(c *config.Config) { c.HTTP.Listen = ":0" }},
		{name: "token without name", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "", SHA256: hashA, Workspaces: []string{"*"}}}
		}, want: []want{{"http.apiTokens[0].name", "1-64 letters"}}},
		{name: "token names repeat", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"*"}}, {Name: "a", SHA256: hashB, Workspaces: []string{"*"}}}
		}, want: []want{{"http.apiTokens[1].name", "also the name of http.apiTokens[0]"}}},
		{name: "token hash upper case", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: strings.ToUpper(hashA), Workspaces: []string{"*"}}}
		}, want: []want{{"http.apiTokens[0].sha256", "64 lower-case hex digits"}}},
		{name: "token hash too short", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA[:40], Workspaces: []string{"*"}}}
		}, want: []want{{"http.apiTokens[0].sha256", "64 lower-case hex digits"}}},
		{name: "token hashes repeat", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"*"}}, {Name: "b", SHA256: hashA, Workspaces: []string{"*"}}}
		}, want: []want{{"http.apiTokens[1].sha256", "also the hash of http.apiTokens[0]"}}},
		{name: "token without workspaces", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA}}
		}, want: []want{{"http.apiTokens[0].workspaces", "must list workspace ids"}}},
		{name: "token star with others", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"ws-1", "*"}}}
		}, want: []want{{"http.apiTokens[0].workspaces[1]", "must be alone"}}},
		{name: "token workspace twice", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"ws-1", "ws-1"}}}
		}, want: []want{{"http.apiTokens[0].workspaces[1]", "listed twice"}}},
		{name: "token workspace malformed", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"ws/1"}}}
		}, want: []want{{"http.apiTokens[0].workspaces[0]", "must be a workspace id"}}},
		{name: "scoped tokens are fine", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"ws-1", "ws-2"}}, {Name: "b", SHA256: hashB, Workspaces: []string{"*"}}}
		}},
		{name: "admin hash malformed", mutate: func(c *config.Config) { c.HTTP.AdminTokenSHA256 = "abc" },
			want: []want{{"http.adminTokenSHA256", "64 lower-case hex digits"}}},
		{name: "admin hash equals an API token's", mutate: func(c *config.Config) {
			c.HTTP.APITokens = []config.APIToken{{Name: "a", SHA256: hashA, Workspaces: []string{"*"}}}
			c.HTTP.AdminTokenSHA256 = hashA
		}, want: []want{{"http.adminTokenSHA256", "must differ from the hash of http.apiTokens[0]"}}},
		{name: "cursor key too short", mutate: func(c *config.Config) { c.HTTP.CursorKey = "short-key" },
			want: []want{{"http.cursorKey", "at least 32 bytes"}}},
		{name: "cursor key of 32 bytes is fine", mutate: func(c *config.Config) { c.HTTP.CursorKey = config.Secret(strings.Repeat("k", 32)) }},

		// synthesis
		{name: "synthesizer unknown", mutate: func(c *config.Config) { c.Synthesis.Synthesizer = "gpt" },
			want: []want{{"synthesis.synthesizer", "one of rules, openai"}}},
		{name: "openai without its settings", mutate: func(c *config.Config) { c.Synthesis.Synthesizer = config.SynthesizerOpenAI },
			want: []want{
				{"synthesis.openai.baseURL", "because synthesis.synthesizer is openai"},
				{"synthesis.openai.model", "because synthesis.synthesizer is openai"},
				{"synthesis.openai.apiKey", "LARKLINE_SYNTHESIS__OPENAI__APIKEY"},
			}},
		{name: "openai complete is fine", mutate: openAIReady},
		{name: "openai timeout zero", mutate: func(c *config.Config) { c.Synthesis.OpenAI.Timeout = 0 },
			want: []want{{"synthesis.openai.timeout", "must be positive"}}},
		{name: "openai output tokens zero", mutate: func(c *config.Config) { c.Synthesis.OpenAI.MaxOutputTokens = 0 },
			want: []want{{"synthesis.openai.maxOutputTokens", "at least 1"}}},
		{name: "prompt version empty", mutate: func(c *config.Config) { c.Synthesis.PromptVersion = "" },
			want: []want{{"synthesis.promptVersion", "such as v1"}}},
		{name: "prompt version with space", mutate: func(c *config.Config) { c.Synthesis.PromptVersion = "v 2" },
			want: []want{{"synthesis.promptVersion", "such as v1"}}},

		// log
		{name: "log level unknown", mutate: func(c *config.Config) { c.Log.Level = "verbose" },
			want: []want{{"log.level", "debug, info, warn, error"}}},
		{name: "log format unknown", mutate: func(c *config.Config) { c.Log.Format = "xml" },
			want: []want{{"log.format", "json or text"}}},

		// secrets and ids that switches need
		{name: "webhook ingestion without its secrets", mutate: func(c *config.Config) {
			timeline(c).Enabled, timeline(c).EventIngestionEnabled = true, true
		}, want: []want{
			{"lark.verificationToken", "eventIngestionEnabled is true with lark.mode webhook"},
			{"lark.encryptKey", "lark.encryptKeyFile"},
		}},
		{name: "webhook ingestion with its secrets is fine", mutate: webhookReady},
		{name: "ingestion switch ignored while master switch off", mutate: func(c *config.Config) {
			timeline(c).EventIngestionEnabled, timeline(c).ReconciliationEnabled = true, true
		}},
		{name: "longconn ingestion without app credentials", mutate: func(c *config.Config) {
			timeline(c).Enabled, timeline(c).EventIngestionEnabled = true, true
			c.Lark.Mode = config.LarkModeLongConn
		}, want: []want{
			{"lark.appID", "eventIngestionEnabled is true with lark.mode longconn"},
			{"lark.appSecret", "LARKLINE_LARK__APPSECRET"},
		}},
		{name: "reconciliation without app credentials", mutate: func(c *config.Config) {
			timeline(c).Enabled, timeline(c).ReconciliationEnabled = true, true
		}, want: []want{{"lark.appID", "reconciliationEnabled is true"}, {"lark.appSecret", "reconciliationEnabled is true"}}},
		{name: "one problem per missing value, naming every reason", mutate: func(c *config.Config) {
			timeline(c).Enabled, timeline(c).EventIngestionEnabled, timeline(c).ReconciliationEnabled = true, true, true
			c.Lark.Mode = config.LarkModeLongConn
		}, want: []want{
			{"lark.appID", "longconn, and services.workspace.timeline.lark.reconciliationEnabled is true"},
			{"lark.appSecret", "longconn, and services.workspace.timeline.lark.reconciliationEnabled is true"},
		}},
		{name: "everything on and complete is fine", mutate: func(c *config.Config) {
			webhookReady(c)
			timeline(c).ReconciliationEnabled = true
			c.Lark.AppID, c.Lark.AppSecret = "cli_x", "s"
			openAIReady(c)
			timeline(c).Retention.Enabled = true
		}},

		// several problems are reported together
		{name: "all problems at once", mutate: func(c *config.Config) {
			timeline(c).Environment = "Prod"
			c.Kafka.Partitions = 0
			c.Lark.API.PageSize = 0
			c.Log.Format = "xml"
		}, want: []want{
			{tl + "environment", "lower-case"},
			{"kafka.partitions", "at least 1"},
			{"lark.api.pageSize", "at least 1"},
			{"log.format", "json or text"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			tt.mutate(c)
			configtest.CheckProblems(t, c.Validate(), tt.want)
		})
	}
}

func TestRequire(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*config.Config)
		paths []string
		want  []want
	}{
		{name: "empty DSN", paths: []string{"postgres.dsn"},
			want: []want{{"postgres.dsn", "postgres.dsnFile"}}},
		{name: "DSN set", setup: func(c *config.Config) { c.Postgres.DSN = "postgres://x" }, paths: []string{"postgres.dsn"}},
		{name: "empty list and string", setup: func(c *config.Config) { c.Kafka.Brokers = nil }, paths: []string{"kafka.brokers", "lark.appID"},
			want: []want{{"kafka.brokers", "LARKLINE_KAFKA__BROKERS"}, {"lark.appID", "LARKLINE_LARK__APPID"}}},
		{name: "unknown path", paths: []string{"postgres.password"}, want: []want{{"postgres.password", "not a configuration key"}}},
		{name: "section is not a key", paths: []string{"kafka.tls"}, want: []want{{"kafka.tls", "not a configuration key"}}},
		{name: "nothing asked", paths: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			if tt.setup != nil {
				tt.setup(c)
			}
			err := c.Require(tt.paths...)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var cerr *config.Error
			if !errors.As(err, &cerr) || len(cerr.Problems) != len(tt.want) {
				t.Fatalf("Require = %v, want %d problems", err, len(tt.want))
			}
			for i, w := range tt.want {
				if p := cerr.Problems[i]; p.Field != w[0] || !strings.Contains(p.Message, w[1]) {
					t.Errorf("problem %d = %v, want %s containing %q", i, p, w[0], w[1])
				}
			}
		})
	}
}

func TestOptionProblemsNamesKeysAndKeepsTheRest(t *testing.T) {
	c := config.Default()
	sentinel := errors.New("stage: invalid options")
	var p options.Problems
	p.Add("PageSize", 60, "must be between 1 and 50")
	p.Add("Unmapped", 3, "must be 4")
	got := c.OptionProblems("reconcile", config.FieldKeys{"PageSize": "lark.api.pageSize"}, p.Err(sentinel))
	want := []config.Problem{
		// the file's value and source, not the package's view of it
		{Field: "lark.api.pageSize", Value: "50", Source: "", Message: "must be between 1 and 50"},
		// a field no key sets: reported under the stage, nothing lost
		{Field: "reconcile", Message: "Unmapped 3: must be 4"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("OptionProblems = %+v\nwant %+v", got, want)
	}
	var lists options.Problems
	lists.Add("Topics", "b", "must be a topic name")
	keys := config.FieldKeys{"Topics=a": "kafka.topics.evidence", "Topics=b": "kafka.topics.deadLetter", "Topics": "kafka.topics.checkpoints"}
	if got := c.OptionProblems("kafka", keys, lists.Err(sentinel)); len(got) != 1 || got[0].Field != "kafka.topics.deadLetter" {
		t.Fatalf("a list field is named by its value's key: %+v", got)
	}
	if got := c.OptionProblems("windows", nil, errors.New("no brokers")); len(got) != 1 || got[0].Field != "windows" || got[0].Message != "no brokers" {
		t.Fatalf("an error without option problems: %+v", got)
	}
	if got := c.OptionProblems("windows", nil, nil); got != nil {
		t.Fatalf("nil error: %+v", got)
	}
}

func TestValidateWithLeavesOutRepeats(t *testing.T) {
	c := config.Default()
	rf := config.Problem{Field: "kafka.replicationFactor", Message: "must be between 1 and 32767"}
	first := func(*config.Config) []config.Problem {
		// two fields set from one key: said once; another problem on it: kept
		return []config.Problem{rf, rf, {Field: "kafka.replicationFactor", Message: "other"}}
	}
	second := func(*config.Config) []config.Problem {
		// a key an earlier stage refused: left out; a new key: kept
		return []config.Problem{{Field: "kafka.replicationFactor", Message: "again"}, {Field: "kafka.partitions", Message: "p"}}
	}
	var cerr *config.Error
	if err := c.ValidateWith(first, second); !errors.As(err, &cerr) || len(cerr.Problems) != 3 {
		t.Fatalf("ValidateWith = %v, want 3 problems", err)
	}
	c.Kafka.Partitions = 0 // refused by the file's own rule: the stage's problem is left out
	if err := c.ValidateWith(second); !errors.As(err, &cerr) || len(cerr.Problems) != 2 || cerr.Problems[0].Message != "must be at least 1" {
		t.Fatalf("ValidateWith = %v, want the file's problem and the stage's other one", err)
	}
	if err := config.Default().ValidateWith(); err != nil {
		t.Fatalf("no stages, a valid file: %v", err)
	}
}
