package main

import (
	"errors"
	"time"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/connectors/lark/reconcile"
	pgsink "github.com/larkline/larkline/connectors/postgres"
	"github.com/larkline/larkline/connectors/workspaces"
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/httpapi"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lagexport"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/retention"
	"github.com/larkline/larkline/processors/synthesis"
	"github.com/larkline/larkline/processors/synthesis/openai"
	"github.com/larkline/larkline/processors/windows"
	"github.com/larkline/larkline/schemas"
)

// The one mapping of configuration keys onto each stage's value options. A role
// takes the stage's options from here and adds its dependencies (store, clients,
// codecs); stageChecks run the stage's own Options.Check on the same options at
// load and report each problem under the key that set the field. The rules
// live in the stages (docs/decisions.md D17); each FieldKeys table names, for
// every field set here, its key.

const tl = "services.workspace.timeline.lark."

// validateConfig checks the file's own rules and every stage's (stageChecks),
// all problems at once.
func validateConfig(cfg *config.Config) error { return cfg.ValidateWith(stageChecks...) }

// stageChecks run each stage's Options.Check on the configured options. Every
// stage is checked whether or not this process runs it: a file is right or wrong
// as a whole, not per role.
var stageChecks = []config.StageCheck{
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("kafka", kafkaKeys(c), gokaOptions(c, "").Check())
	},
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("windows", windowsKeys, windowsOptions(c, c.Windows.ProcessorVersion).Check())
	},
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("reconcile", reconcileKeys, reconcileOptions(c).Check())
	},
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("synthesis", synthesisKeys, synthesisOptions(c).Check())
	},
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("retention", retentionKeys, retentionOptions(c).Check())
	},
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("normalize", normalizeKeys, normalizeOptions(c).Check())
	},
	func(c *config.Config) []config.Problem {
		return c.OptionProblems("webhook", webhookKeys, webhookOptions(c).Check())
	},
	func(c *config.Config) []config.Problem {
		if c.Schemas.Registry.URL == "" {
			return nil // no registry: the Avro single-object encoding
		}
		return c.OptionProblems("schemas", registryKeys, registryProblems(registryOptions(c).Check()))
	},
	func(c *config.Config) []config.Problem {
		if !c.Postgres.DSN.IsSet() {
			return nil // required where needed (loadConfig's required keys)
		}
		return c.OptionProblems("postgres", postgresKeys, poolConfig(c).Check())
	},
	func(c *config.Config) []config.Problem {
		if c.Synthesis.Synthesizer != config.SynthesizerOpenAI {
			return nil // the client's rules apply only to the client in use
		}
		return c.OptionProblems("openai", openaiKeys, openaiOptions(c).Check())
	},
}

// gokaOptions: the Kafka clients, franz-go's (the embedded Options) and Goka's.
func gokaOptions(cfg *config.Config, clientSuffix string) kafka.GokaOptions {
	return kafka.GokaOptions{
		Options:           kafkaOptions(cfg, clientSuffix),
		Version:           cfg.Kafka.SaramaVersion,
		TableReplication:  int(cfg.Kafka.ReplicationFactor),
		StreamReplication: int(cfg.Kafka.ReplicationFactor),
		CheckTopicsOnly:   !cfg.Kafka.ManageTopics,
	}
}

// kafkaKeys names the keys of the Kafka options; the large-record topics come
// from two topic keys, named by value.
func kafkaKeys(cfg *config.Config) config.FieldKeys {
	keys := config.FieldKeys{
		"Producer.LargeRecordTopics=" + cfg.Kafka.Topics.DeadLetter:    "kafka.topics.deadLetter",
		"Producer.LargeRecordTopics=" + cfg.Kafka.Topics.WindowsClosed: "kafka.topics.windowsClosed",
	}
	for field, key := range kafkaFieldKeys {
		keys[field] = key
	}
	return keys
}

var kafkaFieldKeys = config.FieldKeys{
	"Brokers":                     "kafka.brokers",
	"ClientID":                    "kafka.clientID",
	"Producer.Acks":               "kafka.producer.acks",
	"Producer.Linger":             "kafka.producer.linger",
	"Producer.MaxBufferedRecords": "kafka.producer.maxBufferedRecords",
	"Producer.Compression":        "kafka.producer.compression",
	"Consumer.SessionTimeout":     "kafka.consumer.sessionTimeout",
	"Consumer.RebalanceTimeout":   "kafka.consumer.rebalanceTimeout",
	"Consumer.FetchMaxWait":       "kafka.consumer.fetchMaxWait",
	"SASL.Mechanism":              "kafka.sasl.mechanism",
	"SASL.Username":               "kafka.sasl.username",
	"SASL.Password":               "kafka.sasl.password",
	"TLS.CAFile":                  "kafka.tls.caFile",
	"TLS.CertFile":                "kafka.tls.certFile",
	"TLS.KeyFile":                 "kafka.tls.keyFile",
	"TLS.ServerName":              "kafka.tls.serverName",
	"SASL.OAuth.TokenFile":        "kafka.sasl.oauth.tokenFile",
	"SASL.OAuth.TokenURL":         "kafka.sasl.oauth.tokenURL",
	"SASL.OAuth.ClientID":         "kafka.sasl.oauth.clientID",
	"AllowInsecure":               "allowInsecure",
	"Version":                     "kafka.saramaVersion",
	"TableReplication":            "kafka.replicationFactor",
	"StreamReplication":           "kafka.replicationFactor",
}

// registryProblems carries schemas' own option problems (schemas lies below internal
// and cannot use internal/options) over into the options.Error every stage returns.
func registryProblems(err error) error {
	var re *schemas.RegistryOptionsError
	if !errors.As(err, &re) {
		return err
	}
	p := new(options.Problems)
	for _, rp := range re.Problems {
		p.Add(rp.Field, rp.Value, "%s", rp.Message)
	}
	return p.Err(schemas.ErrInvalidRegistryOptions)
}

// registryOptions: the schema registry client of the codecs.
func registryOptions(cfg *config.Config) schemas.RegistryOptions {
	r := cfg.Schemas.Registry
	return schemas.RegistryOptions{
		URL: r.URL, Username: r.Username, Password: r.Password.Value(), BearerToken: r.BearerToken.Value(),
		CAFile: r.TLS.CAFile, CertFile: r.TLS.CertFile, KeyFile: r.TLS.KeyFile, ServerName: r.TLS.ServerName,
		Timeout: r.Timeout, AutoRegister: cfg.Schemas.AutoRegister,
	}
}

var registryKeys = config.FieldKeys{
	"URL":         "schemas.registry.url",
	"Username":    "schemas.registry.username",
	"Password":    "schemas.registry.password",
	"BearerToken": "schemas.registry.bearerToken",
	"CAFile":      "schemas.registry.tls.caFile",
	"CertFile":    "schemas.registry.tls.certFile",
	"KeyFile":     "schemas.registry.tls.keyFile",
	"ServerName":  "schemas.registry.tls.serverName",
	"Timeout":     "schemas.registry.timeout",
}

// windowsOptions: the window processor of one version.
func windowsOptions(cfg *config.Config, version string) windows.Options {
	l := cfg.Services.Workspace.Timeline.Lark
	t := cfg.Kafka.Topics
	return windows.Options{
		ProcessorVersion:  version,
		GroupPrefix:       cfg.Kafka.GroupPrefix,
		EvidenceTopic:     t.Evidence,
		CheckpointTopic:   t.Checkpoints,
		ClosedTopic:       t.WindowsClosed,
		DeadLetterTopic:   t.DeadLetter,
		Window:            l.SynthesisWindow,
		Grace:             l.SynthesisWindowCloseGrace,
		RequireCoverage:   l.ReconciliationActive(),
		Retention:         l.IngestionLookback,
		ScanInterval:      l.SynthesisScanInterval,
		OversizedVersions: new(cfg.Windows.OversizedVersions), // 0: never flag
		CheckTopicsOnly:   !cfg.Kafka.ManageTopics,
		TopicReplication:  cfg.Kafka.ReplicationFactor,
	}
}

var windowsKeys = config.FieldKeys{
	"ProcessorVersion":  "windows.processorVersion",
	"EvidenceTopic":     "kafka.topics.evidence",
	"CheckpointTopic":   "kafka.topics.checkpoints",
	"ClosedTopic":       "kafka.topics.windowsClosed",
	"DeadLetterTopic":   "kafka.topics.deadLetter",
	"Window":            tl + "synthesisWindow",
	"Grace":             tl + "synthesisWindowCloseGrace",
	"Retention":         tl + "ingestionLookback",
	"ScanInterval":      tl + "synthesisScanInterval",
	"OversizedVersions": "windows.oversizedVersions",
}

// reconcileOptions: history reconciliation.
func reconcileOptions(cfg *config.Config) reconcile.Options {
	l := cfg.Services.Workspace.Timeline.Lark
	a := cfg.Lark.API
	retention := l.Retention.EvidenceRetention
	if !l.Retention.Enabled {
		retention = 0
	}
	return reconcile.Options{
		EvidenceTopic: cfg.Kafka.Topics.Evidence, CheckpointTopic: cfg.Kafka.Topics.Checkpoints,
		IngestionLookback: l.IngestionLookback, ReconcileInterval: l.ReconcileInterval, ReconcileOverlap: l.ReconcileOverlap,
		EvidenceRefreshInterval: l.EvidenceRefreshInterval, EvidenceRefreshLookback: l.EvidenceRefreshLookback,
		Retention: retention,
		// Coverage passes follow the window clock (docs/decisions.md D15).
		Window:            l.SynthesisWindow,
		RequestsPerSecond: a.RequestsPerSecond, Burst: a.Burst, MaxConcurrentChats: a.MaxConcurrentChats,
		MaxPagesPerRun: a.MaxPagesPerRun, PageSize: a.PageSize, MaxRetries: a.MaxRetries, MaxBackoff: a.MaxBackoff,
	}
}

var reconcileKeys = config.FieldKeys{
	"EvidenceTopic":           "kafka.topics.evidence",
	"CheckpointTopic":         "kafka.topics.checkpoints",
	"IngestionLookback":       tl + "ingestionLookback",
	"ReconcileInterval":       tl + "reconcileInterval",
	"ReconcileOverlap":        tl + "reconcileOverlap",
	"EvidenceRefreshInterval": tl + "evidenceRefreshInterval",
	"EvidenceRefreshLookback": tl + "evidenceRefreshLookback",
	"Retention":               tl + "retention.evidenceRetention",
	"Window":                  tl + "synthesisWindow",
	"RequestsPerSecond":       "lark.api.requestsPerSecond",
	"Burst":                   "lark.api.burst",
	"MaxConcurrentChats":      "lark.api.maxConcurrentChats",
	"MaxPagesPerRun":          "lark.api.maxPagesPerRun",
	"PageSize":                "lark.api.pageSize",
	"MaxRetries":              "lark.api.maxRetries",
	"MaxBackoff":              "lark.api.maxBackoff",
}

// synthesisOptions: the synthesis worker.
func synthesisOptions(cfg *config.Config) synthesis.Options {
	l := cfg.Services.Workspace.Timeline.Lark
	t := cfg.Kafka.Topics
	return synthesis.Options{
		Kafka: kafkaOptions(cfg, "synthesis"), Group: groupName(cfg, groupSynthesis), Topic: t.WindowsClosed, DeadLetterTopic: t.DeadLetter,
		PromptVersion:   cfg.Synthesis.PromptVersion,
		ContextLookback: l.SynthesisContextLookback, StaleTimeout: l.SynthesisStaleTimeout, MaxAttempts: l.SynthesisWindowMaxAttempts,
		ChunkTimeout: synthesizerOf(cfg).chunkTimeout(), EvidenceWait: cfg.Synthesis.EvidenceWait,
		ScanInterval: l.SynthesisScanInterval, EvidenceBatchLimit: l.EvidenceBatchLimit,
		MaxEstimatedTokensPerChunk: l.MaxEstimatedTokensPerChunk, MaxConcurrentSynthesis: l.MaxConcurrentSynthesis,
	}
}

var synthesisKeys = config.FieldKeys{
	"Group":                      "kafka.groupPrefix",
	"DeadLetterTopic":            "kafka.topics.deadLetter",
	"PromptVersion":              "synthesis.promptVersion",
	"ContextLookback":            tl + "synthesisContextLookback",
	"StaleTimeout":               tl + "synthesisStaleTimeout",
	"MaxAttempts":                tl + "synthesisWindowMaxAttempts",
	"ChunkTimeout":               "synthesis.openai.timeout",
	"EvidenceWait":               "synthesis.evidenceWait",
	"ScanInterval":               tl + "synthesisScanInterval",
	"EvidenceBatchLimit":         tl + "evidenceBatchLimit",
	"MaxEstimatedTokensPerChunk": tl + "maxEstimatedTokensPerChunk",
	"MaxConcurrentSynthesis":     tl + "maxConcurrentSynthesis",
}

// retentionOptions: the retention job.
func retentionOptions(cfg *config.Config) retention.Options {
	r := cfg.Services.Workspace.Timeline.Lark.Retention
	return retention.Options{
		Kafka:         kafkaOptions(cfg, "retention"),
		EvidenceTopic: cfg.Kafka.Topics.Evidence, CheckpointTopic: cfg.Kafka.Topics.Checkpoints,
		Retention: r.EvidenceRetention, Mode: retention.Mode(r.Mode), Interval: r.Interval,
	}
}

var retentionKeys = config.FieldKeys{
	"Kafka.Producer.Acks": "kafka.producer.acks",
	"EvidenceTopic":       "kafka.topics.evidence",
	"CheckpointTopic":     "kafka.topics.checkpoints",
	"Retention":           tl + "retention.evidenceRetention",
	"Mode":                tl + "retention.mode",
	"Interval":            tl + "retention.interval",
}

// normalizeOptions: the Lark message normalizer.
func normalizeOptions(cfg *config.Config) normalize.Options {
	return normalize.Options{SelfAppID: cfg.Lark.AppID, SelfBotOpenID: cfg.Lark.BotOpenID,
		MaxTextBytes: cfg.Services.Workspace.Timeline.Lark.MaxMessageTextBytes}
}

var normalizeKeys = config.FieldKeys{
	"SelfAppID":     "lark.appID",
	"SelfBotOpenID": "lark.botOpenID",
	"MaxTextBytes":  tl + "maxMessageTextBytes",
}

// webhookOptions: the Lark event webhook (its secrets are added by the role).
func webhookOptions(cfg *config.Config) ingest.WebhookOptions {
	return ingest.WebhookOptions{MaxTimestampSkew: cfg.Lark.MaxTimestampSkew, URLVerification: cfg.Lark.URLVerification}
}

var webhookKeys = config.FieldKeys{"MaxTimestampSkew": "lark.maxTimestampSkew"}

// openaiOptions: the OpenAI-compatible model client.
func openaiOptions(cfg *config.Config) openai.Options {
	o := cfg.Synthesis.OpenAI
	return openai.Options{
		BaseURL: o.BaseURL, Model: o.Model, APIKey: o.APIKey.Value(), Timeout: o.Timeout,
		MaxRetries: new(o.MaxRetries), MaxOutputTokens: o.MaxOutputTokens, PromptVersion: cfg.Synthesis.PromptVersion,
		AllowInsecure: cfg.AllowInsecure,
	}
}

var postgresKeys = config.FieldKeys{"DSN": "postgres.dsn", "AllowInsecure": "allowInsecure"}

var openaiKeys = config.FieldKeys{
	"BaseURL":         "synthesis.openai.baseURL",
	"Model":           "synthesis.openai.model",
	"APIKey":          "synthesis.openai.apiKey",
	"Timeout":         "synthesis.openai.timeout",
	"MaxRetries":      "synthesis.openai.maxRetries",
	"MaxOutputTokens": "synthesis.openai.maxOutputTokens",
	"PromptVersion":   "synthesis.promptVersion",
	"AllowInsecure":   "allowInsecure",
}

// roleOptions is what the roles are built from: each stage's options as the
// configuration sets them, mapped once (newRoleOptions) by this file's functions.
// A role takes its stage's options and adds its dependencies; no role reads the
// configuration.
type roleOptions struct {
	kafka  kafka.Options // every client's; kafkaFor names one
	goka   kafka.GokaOptions
	topics kafka.TopicNames

	windows  windows.Options // windows.processorVersion's
	stateDir string          // windows.stateDir

	pool        store.PoolConfig
	poolMissing error // postgres.dsn unset: refused where a role needs the pool

	sink       pgsink.Options
	workspaces workspaces.ConsumerOptions
	admin      workspaces.HandlerOptions
	api        httpapi.Options
	cursorKey  string
	lag        lagexport.Options

	synthesis   synthesis.Options
	synthesizer synthesizerOptions

	retentionOn bool
	retention   retention.Options

	// The Lark roles: ingest (webhook or long connection) and reconcile.
	ingestOn, reconcileOn bool
	larkSDK               larkapi.SDKOptions
	larkMissing           error // lark.appID or lark.appSecret unset
	normalize             normalize.Options
	bindings              bindings.Options
	contacts              ingest.ContactsOptions
	longConn              *ingest.LongConnOptions // nil: the webhook
	webhook               ingest.WebhookOptions
	webhookPath           string
	reconcile             reconcile.Options
}

// newRoleOptions maps cfg onto every role's options.
func newRoleOptions(cfg *config.Config) *roleOptions {
	l := cfg.Services.Workspace.Timeline.Lark
	t := cfg.Kafka.Topics
	o := &roleOptions{
		kafka: kafkaOptions(cfg, ""), goka: gokaOptions(cfg, ""), topics: topicNames(cfg),
		windows: windowsOptions(cfg, cfg.Windows.ProcessorVersion), stateDir: cfg.Windows.StateDir,
		pool: poolConfig(cfg), poolMissing: cfg.Require("postgres.dsn"),
		sink: pgsink.Options{Kafka: kafkaOptions(cfg, "sink"), Group: groupName(cfg, groupSink),
			EvidenceTopic: t.Evidence, DeadLetterTopic: t.DeadLetter},
		workspaces: workspaces.ConsumerOptions{Kafka: kafkaOptions(cfg, "workspaces"), Group: groupName(cfg, groupWorkspaces),
			Topic: t.Workspaces, DeadLetterTopic: t.DeadLetter},
		admin:     workspaces.HandlerOptions{AdminTokenSHA256: cfg.HTTP.AdminTokenSHA256, AdminScopeTokenSHA256: adminScopeTokens(cfg)},
		api:       httpapi.Options{Tokens: apiTokens(cfg), EvidenceListed: l.EvidenceListedInAPI},
		cursorKey: cfg.HTTP.CursorKey.Value(),
		lag: lagexport.Options{Kafka: kafkaOptions(cfg, "lag"), Groups: lagGroups(cfg), GroupPrefixes: []string{versionGroupsPrefix(cfg)},
			KafkaLagExporter: lagexport.KafkaLagExporterOptions{Enabled: cfg.Lag.KafkaLagExporterMetrics, ClusterName: cfg.Lag.ClusterName}},
		synthesis: synthesisOptions(cfg), synthesizer: synthesizerOf(cfg),
		retentionOn: l.Retention.Enabled, retention: retentionOptions(cfg),
		ingestOn: l.EventIngestionActive(), reconcileOn: l.ReconciliationActive(),
		larkSDK:     larkapi.SDKOptions{AppID: cfg.Lark.AppID, AppSecret: cfg.Lark.AppSecret.Value(), OpenBaseURL: cfg.Lark.OpenBaseURL},
		larkMissing: cfg.Require("lark.appID", "lark.appSecret"),
		normalize:   normalizeOptions(cfg),
		bindings:    bindings.Options{WorkspaceTypes: l.WorkspaceTypes, Lookback: l.IngestionLookback},
		contacts:    ingest.ContactsOptions{RequestsPerSecond: cfg.Lark.API.RequestsPerSecond / 4},
		webhook:     webhookOptions(cfg), webhookPath: cfg.Lark.WebhookPath,
		reconcile: reconcileOptions(cfg),
	}
	o.webhook.VerificationToken, o.webhook.EncryptKey = cfg.Lark.VerificationToken.Value(), cfg.Lark.EncryptKey.Value()
	if cfg.Lark.Mode == config.LarkModeLongConn {
		o.longConn = &ingest.LongConnOptions{AppID: cfg.Lark.AppID, AppSecret: cfg.Lark.AppSecret.Value(), Domain: cfg.Lark.OpenBaseURL}
	}
	return o
}

// kafkaFor is the Kafka options of one client, named <clientID>-<suffix>.
func (o *roleOptions) kafkaFor(suffix string) kafka.Options {
	k := o.kafka
	k.ClientID += "-" + suffix
	return k
}

// apiTokens maps http.apiTokens onto the API's tokens.
func apiTokens(cfg *config.Config) []httpapi.Token {
	tokens := make([]httpapi.Token, len(cfg.HTTP.APITokens))
	for i, t := range cfg.HTTP.APITokens {
		tokens[i] = httpapi.Token{Name: t.Name, SHA256: t.SHA256, Workspaces: t.Workspaces, Scope: t.Scope}
	}
	return tokens
}

// adminScopeTokens are the digests of the API tokens of scope admin.
func adminScopeTokens(cfg *config.Config) []string {
	var out []string
	for _, t := range cfg.HTTP.APITokens {
		if t.Scope == httpapi.ScopeAdmin {
			out = append(out, t.SHA256)
		}
	}
	return out
}

// synthesizerOptions: the synthesizer, and the model client a processor version's
// own settings (D31) are laid over.
type synthesizerOptions struct {
	openAI bool           // synthesis.synthesizer is openai; else the rules
	openai openai.Options // also while the rules synthesize: a version may call the model
}

func synthesizerOf(cfg *config.Config) synthesizerOptions {
	return synthesizerOptions{openAI: cfg.Synthesis.Synthesizer == config.SynthesizerOpenAI, openai: openaiOptions(cfg)}
}

// chunkTimeout bounds one Synthesize call: the model client's own retries of its
// request timeout, with a margin; the rules run in microseconds.
func (s synthesizerOptions) chunkTimeout() time.Duration {
	if !s.openAI {
		return 10 * time.Second
	}
	return time.Duration(*s.openai.MaxRetries+1)*s.openai.Timeout + 10*time.Second
}

// with lays a version's own synthesis settings over s.
func (s synthesizerOptions) with(v *store.VersionSynthesis) synthesizerOptions {
	s.openAI = v.Synthesizer == string(config.SynthesizerOpenAI)
	s.openai.PromptVersion = v.PromptVersion
	if v.OpenAI.Model != "" {
		s.openai.Model = v.OpenAI.Model
	}
	if v.OpenAI.MaxOutputTokens != 0 {
		s.openai.MaxOutputTokens = v.OpenAI.MaxOutputTokens
	}
	return s
}
