package config

import (
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// Config is larkline's whole configuration: the design's §18 timeline block under
// services.workspace.timeline.lark plus the sections larkline needs to run. Fields
// carry the YAML key in their tag; the key path of a field is its tags joined by dots
// (kafka.producer.linger), and its environment variable is derived from that path
// (see [EnvName]).
type Config struct {
	Services  Services  `yaml:"services"`
	Kafka     Kafka     `yaml:"kafka"`
	Schemas   Schemas   `yaml:"schemas"`
	Postgres  Postgres  `yaml:"postgres"`
	Lark      Lark      `yaml:"lark"`
	HTTP      HTTP      `yaml:"http"`
	Synthesis Synthesis `yaml:"synthesis"`
	Windows   Windows   `yaml:"windows"`
	Lag       Lag       `yaml:"lag"`
	Log       Log       `yaml:"log"`
	// AllowInsecure lets larkline start with transport that exposes data on the
	// network (issue #29): SASL PLAIN without TLS, an http:// model URL to a host that
	// is not loopback, a Postgres DSN to such a host with an sslmode below require.
	AllowInsecure bool `yaml:"allowInsecure"`

	// origins maps a key path to where its value came from ("file.yaml:12",
	// "env LARKLINE_…", "file /run/secrets/…"); nil for a Config not made by Load.
	origins map[string]string
}

// Services nests the design's configuration block.
type Services struct {
	Workspace Workspace `yaml:"workspace"`
}

// Workspace nests the design's configuration block.
type Workspace struct {
	Timeline Timeline `yaml:"timeline"`
}

// Timeline nests the design's configuration block.
type Timeline struct {
	Lark LarkTimeline `yaml:"lark"`
}

// LarkTimeline is the design's §18 block (same keys, same defaults) plus larkline's
// additions from Environment on.
type LarkTimeline struct {
	// Enabled is the master switch: when false nothing ingests, reconciles or
	// synthesises, whatever the other switches say.
	Enabled bool `yaml:"enabled"`
	// EventIngestionEnabled turns on the Lark event path (webhook or long connection).
	EventIngestionEnabled bool `yaml:"eventIngestionEnabled"`
	// ReconciliationEnabled turns on history backfill and incremental reconciliation.
	ReconciliationEnabled bool `yaml:"reconciliationEnabled"`
	// IngestionLookback is how long after its creation a workspace is eligible (§6).
	IngestionLookback time.Duration `yaml:"ingestionLookback"`
	// SynthesisScanInterval is the watcher period that finds due windows (§11).
	SynthesisScanInterval time.Duration `yaml:"synthesisScanInterval"`
	// SynthesisWindow is the fixed UTC window length (§10.2).
	SynthesisWindow time.Duration `yaml:"synthesisWindow"`
	// SynthesisWindowCloseGrace is how long after window end a window waits for late
	// evidence before it may close.
	SynthesisWindowCloseGrace time.Duration `yaml:"synthesisWindowCloseGrace"`
	// SynthesisContextLookback is how far before a window its context reaches (§12.1).
	SynthesisContextLookback time.Duration `yaml:"synthesisContextLookback"`
	// SynthesisStaleTimeout makes a window stuck in processing retryable (§16).
	SynthesisStaleTimeout time.Duration `yaml:"synthesisStaleTimeout"`
	// SynthesisWindowMaxAttempts bounds whole-window attempts before failed (§14).
	SynthesisWindowMaxAttempts int `yaml:"synthesisWindowMaxAttempts"`
	// ReconcileInterval is the period of incremental reconciliation (§8.2).
	ReconcileInterval time.Duration `yaml:"reconcileInterval"`
	// ReconcileOverlap is how far each reconciliation re-reads before its checkpoint.
	ReconcileOverlap time.Duration `yaml:"reconcileOverlap"`
	// EvidenceRefreshInterval is the period of the larger edit/delete refresh pass.
	EvidenceRefreshInterval time.Duration `yaml:"evidenceRefreshInterval"`
	// EvidenceRefreshLookback is how far the refresh pass re-reads.
	EvidenceRefreshLookback time.Duration `yaml:"evidenceRefreshLookback"`
	// EvidenceBatchLimit is the maximum evidence count per synthesis chunk (§14).
	EvidenceBatchLimit int `yaml:"evidenceBatchLimit"`
	// MaxConcurrentSynthesis bounds concurrent window synthesis per process (§14).
	MaxConcurrentSynthesis int `yaml:"maxConcurrentSynthesis"`

	// Environment names the environment this deployment serves (design §6:
	// "enabled for the environment"); it is recorded with what larkline produces.
	Environment string `yaml:"environment"`
	// WorkspaceTypes lists the workspace types ingestion applies to (design §6).
	WorkspaceTypes []string `yaml:"workspaceTypes"`
	// MaxEstimatedTokensPerChunk is the explicit prompt budget per chunk (§14).
	MaxEstimatedTokensPerChunk int `yaml:"maxEstimatedTokensPerChunk"`
	// MaxMessageTextBytes bounds the normalized text kept per message (§7.4).
	MaxMessageTextBytes int `yaml:"maxMessageTextBytes"`
	// EvidenceListedInAPI exposes Lark evidence through the API; off hides it (§15).
	EvidenceListedInAPI bool `yaml:"evidenceListedInAPI"`
	// Retention configures the evidence cleanup job (§15).
	Retention Retention `yaml:"retention"`
}

// EventIngestionActive reports whether the event path runs: master switch and
// feature switch both on.
func (l LarkTimeline) EventIngestionActive() bool { return l.Enabled && l.EventIngestionEnabled }

// ReconciliationActive reports whether reconciliation runs: master switch and feature
// switch both on.
func (l LarkTimeline) ReconciliationActive() bool { return l.Enabled && l.ReconciliationEnabled }

// AppliesTo reports whether ingestion is configured for a workspace type (design §6).
// It does not look at the switches.
func (l LarkTimeline) AppliesTo(workspaceType string) bool {
	return slices.Contains(l.WorkspaceTypes, workspaceType)
}

// RetentionMode says what the retention job does to evidence older than the retention.
type RetentionMode string

// Retention modes.
const (
	// RetentionRedact keeps the evidence row and its bindings but removes text and
	// attachment metadata, and publishes a redacted evidence version.
	RetentionRedact RetentionMode = "redact"
	// RetentionDelete deletes the evidence row and publishes a tombstone.
	RetentionDelete RetentionMode = "delete"
)

// Retention configures evidence cleanup (design §15). It is on by default (design
// §21: retention is enabled before production); turning it off is an explicit
// setting that every process logs at start (issue #19).
type Retention struct {
	Enabled           bool          `yaml:"enabled"`
	EvidenceRetention time.Duration `yaml:"evidenceRetention"`
	Mode              RetentionMode `yaml:"mode"`
	Interval          time.Duration `yaml:"interval"`
}

// Acks is the producer acknowledgement level.
type Acks string

// Acknowledgement levels.
const (
	AcksAll    Acks = "all"
	AcksLeader Acks = "leader"
	AcksNone   Acks = "none"
)

// Compression is the producer batch compression codec.
type Compression string

// Compression codecs.
const (
	CompressionNone   Compression = "none"
	CompressionGzip   Compression = "gzip"
	CompressionSnappy Compression = "snappy"
	CompressionLZ4    Compression = "lz4"
	CompressionZstd   Compression = "zstd"
)

// SASLMechanism is a Kafka SASL mechanism; empty means no SASL.
type SASLMechanism string

// SASL mechanisms.
const (
	SASLNone        SASLMechanism = ""
	SASLPlain       SASLMechanism = "plain"
	SASLScramSHA256 SASLMechanism = "scram-sha-256"
	SASLScramSHA512 SASLMechanism = "scram-sha-512"
	SASLOAuthBearer SASLMechanism = "oauthbearer"
)

// Kafka configures the brokers, topics and clients (franz-go and Goka/sarama).
type Kafka struct {
	Brokers  []string `yaml:"brokers"`
	ClientID string   `yaml:"clientID"`
	// GroupPrefix starts every consumer group name (<prefix>-sink, <prefix>-windows-<version>,
	// …) and so the window processor's state and loop topics: two deployments sharing a
	// cluster, or a cluster whose ACLs grant groups by prefix, set it.
	GroupPrefix       string   `yaml:"groupPrefix"`
	Topics            Topics   `yaml:"topics"`
	Partitions        int32    `yaml:"partitions"`
	ReplicationFactor int16    `yaml:"replicationFactor"`
	Producer          Producer `yaml:"producer"`
	Consumer          Consumer `yaml:"consumer"`
	// SaramaVersion is the Kafka protocol version Goka's sarama client speaks.
	SaramaVersion string `yaml:"saramaVersion"`
	TLS           TLS    `yaml:"tls"`
	SASL          SASL   `yaml:"sasl"`
	// ManageTopics lets larkline create its topics and Goka's and raise their record
	// limit; false (topics managed by Strimzi, Terraform, …) only checks that they
	// exist with compatible settings, so the client needs no Create or AlterConfigs.
	ManageTopics bool `yaml:"manageTopics"`
}

// Schemas configures the schema registry of the record values.
type Schemas struct {
	// Registry is the Confluent-compatible schema registry. With its URL set every
	// record value is written in the Confluent wire format; without, in the Avro
	// single-object encoding (tests; the demo runs an in-memory registry).
	Registry SchemaRegistry `yaml:"registry"`
	// AutoRegister registers each schema under its subject on first use. false:
	// the schemas must be registered beforehand (`larkline schemas register`), and a
	// process whose subject lacks its schema refuses to start.
	AutoRegister bool `yaml:"autoRegister"`
}

// SchemaRegistry configures the schema registry client. TLS files are PEM.
type SchemaRegistry struct {
	URL             string            `yaml:"url"`
	Username        string            `yaml:"username"`
	Password        Secret            `yaml:"password"`
	PasswordFile    string            `yaml:"passwordFile"`
	BearerToken     Secret            `yaml:"bearerToken"`
	BearerTokenFile string            `yaml:"bearerTokenFile"`
	Timeout         time.Duration     `yaml:"timeout"`
	TLS             SchemaRegistryTLS `yaml:"tls"`
}

// SchemaRegistryTLS configures TLS to an https:// schema registry.
type SchemaRegistryTLS struct {
	CAFile     string `yaml:"caFile"`
	CertFile   string `yaml:"certFile"`
	KeyFile    string `yaml:"keyFile"`
	ServerName string `yaml:"serverName"`
}

// Lag configures the lag role's exporter and `larkline lag`.
type Lag struct {
	// Groups are consumer groups to watch besides larkline's own: any group on the
	// cluster, larkline's or not.
	Groups []string `yaml:"groups"`
	// KafkaLagExporterMetrics also exports the series under kafka-lag-exporter's
	// names and labels (kafka_consumergroup_group_lag, …), so that existing
	// dashboards and alerts work unchanged.
	KafkaLagExporterMetrics bool `yaml:"kafkaLagExporterMetrics"`
	// ClusterName is the cluster_name label of the kafka-lag-exporter series.
	ClusterName string `yaml:"clusterName"`
}

// Topics names larkline's topics.
type Topics struct {
	Evidence      string `yaml:"evidence"`
	WindowsClosed string `yaml:"windowsClosed"`
	Checkpoints   string `yaml:"checkpoints"`
	Workspaces    string `yaml:"workspaces"`
	DeadLetter    string `yaml:"deadLetter"`
}

// All returns every topic name, in a fixed order.
func (t Topics) All() []string {
	return []string{t.Evidence, t.WindowsClosed, t.Checkpoints, t.Workspaces, t.DeadLetter}
}

// Producer configures producers.
type Producer struct {
	Acks               Acks          `yaml:"acks"`
	Linger             time.Duration `yaml:"linger"`
	Idempotent         bool          `yaml:"idempotent"`
	MaxBufferedRecords int           `yaml:"maxBufferedRecords"`
	Compression        Compression   `yaml:"compression"`
}

// Consumer configures consumer groups.
type Consumer struct {
	SessionTimeout   time.Duration `yaml:"sessionTimeout"`
	RebalanceTimeout time.Duration `yaml:"rebalanceTimeout"`
	FetchMaxWait     time.Duration `yaml:"fetchMaxWait"`
}

// TLS configures TLS to the brokers. Files are PEM.
type TLS struct {
	Enabled  bool   `yaml:"enabled"`
	CAFile   string `yaml:"caFile"`
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ServerName is the name the brokers' certificates are checked against, when
	// it is not the host the client connects to (a private endpoint, an IP).
	ServerName string `yaml:"serverName"`
}

// SASL configures SASL authentication to the brokers.
type SASL struct {
	Mechanism    SASLMechanism `yaml:"mechanism"`
	Username     string        `yaml:"username"`
	Password     Secret        `yaml:"password"`
	PasswordFile string        `yaml:"passwordFile"`
	// OAuth is the token source of the oauthbearer mechanism.
	OAuth OAuth `yaml:"oauth"`
}

// OAuth says where an OAUTHBEARER token comes from: a file, or a client-credentials
// grant at a token endpoint.
type OAuth struct {
	TokenFile        string `yaml:"tokenFile"`
	TokenURL         string `yaml:"tokenURL"`
	ClientID         string `yaml:"clientID"`
	ClientSecret     Secret `yaml:"clientSecret"`
	ClientSecretFile string `yaml:"clientSecretFile"`
	Scope            string `yaml:"scope"`
}

// Postgres configures the database pool.
type Postgres struct {
	// DSN is a libpq URL or keyword/value string. It is a secret: it usually holds
	// the password.
	DSN            Secret        `yaml:"dsn"`
	DSNFile        string        `yaml:"dsnFile"`
	MaxConns       int32         `yaml:"maxConns"`
	ConnectTimeout time.Duration `yaml:"connectTimeout"`
}

// LarkMode selects how events arrive from Lark.
type LarkMode string

// Lark event modes.
const (
	LarkModeWebhook  LarkMode = "webhook"
	LarkModeLongConn LarkMode = "longconn"
)

// Lark endpoints for Lark (international) and Feishu (China).
const (
	LarkOpenBaseURL   = "https://open.larksuite.com"
	FeishuOpenBaseURL = "https://open.feishu.cn"
)

// Lark configures the Lark app and Open API access.
type Lark struct {
	Mode                  LarkMode      `yaml:"mode"`
	AppID                 string        `yaml:"appID"`
	AppSecret             Secret        `yaml:"appSecret"`
	AppSecretFile         string        `yaml:"appSecretFile"`
	VerificationToken     Secret        `yaml:"verificationToken"`
	VerificationTokenFile string        `yaml:"verificationTokenFile"`
	EncryptKey            Secret        `yaml:"encryptKey"`
	EncryptKeyFile        string        `yaml:"encryptKeyFile"`
	BotOpenID             string        `yaml:"botOpenID"`
	OpenBaseURL           string        `yaml:"openBaseURL"`
	WebhookPath           string        `yaml:"webhookPath"`
	MaxTimestampSkew      time.Duration `yaml:"maxTimestampSkew"`
	// URLVerification lets the webhook decrypt an unsigned body to answer Lark's
	// url_verification (sent unsigned); off, an unsigned request is refused undecrypted.
	URLVerification bool    `yaml:"urlVerification"`
	API             LarkAPI `yaml:"api"`
}

// LarkAPI bounds larkline's use of the Lark Open API.
type LarkAPI struct {
	RequestsPerSecond  float64       `yaml:"requestsPerSecond"`
	Burst              int           `yaml:"burst"`
	MaxConcurrentChats int           `yaml:"maxConcurrentChats"`
	MaxPagesPerRun     int           `yaml:"maxPagesPerRun"`
	PageSize           int           `yaml:"pageSize"`
	MaxRetries         int           `yaml:"maxRetries"`
	MaxBackoff         time.Duration `yaml:"maxBackoff"`
}

// HTTP configures the HTTP listener shared by the ops endpoints, the webhook, the API
// and the web page.
type HTTP struct {
	// Listen serves the ops endpoints (/metrics, /readyz, /healthz) and the admin
	// API; APIListen the timeline API and the page; WebhookListen the Lark webhook
	// alone (issue #29: the public ingress exposes nothing else). A listen address
	// equal to another is served by the same listener (the demo shares one).
	Listen        string     `yaml:"listen"`
	APIListen     string     `yaml:"apiListen"`
	WebhookListen string     `yaml:"webhookListen"`
	APITokens     []APIToken `yaml:"apiTokens"`
	// AdminTokenSHA256 is the hex SHA-256 of the token for admin endpoints; empty
	// disables them.
	AdminTokenSHA256 string `yaml:"adminTokenSHA256"`
	// CursorKey authenticates the API's page cursors (HMAC-SHA256); the same on every
	// api replica. Empty: the api role generates a random key at start and warns
	// (cursors then do not survive a restart and differ between replicas).
	CursorKey     Secret `yaml:"cursorKey"`
	CursorKeyFile string `yaml:"cursorKeyFile"`
	// Profiling serves Go's profiles (net/http/pprof) on Listen under /debug/pprof/.
	Profiling bool `yaml:"profiling"`
}

// MinCursorKeyBytes is the shortest http.cursorKey accepted.
const MinCursorKeyBytes = 32

// AllWorkspaces in APIToken.Workspaces grants every workspace.
const AllWorkspaces = "*"

// APIToken is one API bearer token, stored as the hex SHA-256 of the token.
type APIToken struct {
	Name       string   `yaml:"name"`
	SHA256     string   `yaml:"sha256"`
	Workspaces []string `yaml:"workspaces"`
	// Scope is read (the default when empty: timeline, evidence, summary, page),
	// curate (also edits entries and the human summary) or admin (also the admin
	// API: workspaces, bindings, manual refresh). Issue #29.
	Scope string `yaml:"scope"`
}

// Allows reports whether the token grants access to workspace w.
func (t APIToken) Allows(w ids.WorkspaceID) bool {
	for _, x := range t.Workspaces {
		if x == AllWorkspaces || x == string(w) {
			return true
		}
	}
	return false
}

// SynthesizerKind selects the synthesizer.
type SynthesizerKind string

// Synthesizers.
const (
	SynthesizerRules  SynthesizerKind = "rules"
	SynthesizerOpenAI SynthesizerKind = "openai"
)

// Synthesis configures timeline synthesis.
type Synthesis struct {
	Synthesizer SynthesizerKind `yaml:"synthesizer"`
	OpenAI      OpenAI          `yaml:"openai"`
	// PromptVersion is recorded with every claimed window and, by the openai
	// synthesizer, with every entry. Its default is the model client's own
	// (openai.DefaultPromptVersion), which names the prompts it sends.
	PromptVersion string `yaml:"promptVersion"`
	// EvidenceWait is how long a closed window waits for its evidence before the wait
	// is counted (processors/synthesis Options.EvidenceWait): for a version 3 record,
	// a period of waiting for the sink's commit (the wait goes on); for an older one,
	// one of the windowMaxAttempts waits after which the window needs attention.
	EvidenceWait time.Duration `yaml:"evidenceWait"`
}

// OpenAI configures an OpenAI-compatible chat-completions endpoint.
type OpenAI struct {
	BaseURL         string        `yaml:"baseURL"`
	Model           string        `yaml:"model"`
	APIKey          Secret        `yaml:"apiKey"`
	APIKeyFile      string        `yaml:"apiKeyFile"`
	Timeout         time.Duration `yaml:"timeout"`
	MaxRetries      int           `yaml:"maxRetries"`
	MaxOutputTokens int           `yaml:"maxOutputTokens"`
}

// Log configures the process logger (see internal/logging).
// Windows configures the window processor (processors/windows).
type Windows struct {
	// ProcessorVersion names the Goka group larkline-windows-<version> and the
	// versioned window namespace; a new version replays the evidence topic from the
	// start next to the old one (larkline replay).
	ProcessorVersion string `yaml:"processorVersion"`
	// StateDir holds the processor's local LevelDB copy of its group table; it is a
	// cache of the table topic and is rebuilt from Kafka when lost.
	StateDir string `yaml:"stateDir"`
	// OversizedVersions flags (never fails) a window that takes in more evidence
	// versions (processors/windows Options.OversizedVersions); 0 means never.
	OversizedVersions int `yaml:"oversizedVersions"`
	// HotStandby keeps every instance's copy of the other instances' state table
	// partitions up to date, for a fast takeover (processors/windows
	// Options.HotStandby).
	HotStandby bool `yaml:"hotStandby"`
}

type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Secret is a configuration value that must never be printed. Formatting it (fmt,
// slog, encoding/json, yaml) yields "[REDACTED]" when it is set and "" when it is
// empty; Value returns the secret itself.
type Secret string

// Redacted is what a set Secret prints as.
const Redacted = "[REDACTED]"

// Value returns the secret.
func (s Secret) Value() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the secret.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// LogValue keeps slog from printing the secret.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (encoding/json, yaml, slog handlers) from printing the
// secret. It is deliberately not reversible.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Default returns the production defaults: every feature off but retention, the design's §18
// values, and larkline's own defaults as documented in docs/configuration.md.
// Long on purpose: the table of every default, one line per key, in the order of
// docs/configuration.md.
func Default() *Config {
	return &Config{
		Services: Services{Workspace: Workspace{Timeline: Timeline{Lark: LarkTimeline{
			Enabled:                    false,
			EventIngestionEnabled:      false,
			ReconciliationEnabled:      false,
			IngestionLookback:          72 * time.Hour,
			SynthesisScanInterval:      2 * time.Minute,
			SynthesisWindow:            10 * time.Minute,
			SynthesisWindowCloseGrace:  3 * time.Minute,
			SynthesisContextLookback:   5 * time.Minute,
			SynthesisStaleTimeout:      15 * time.Minute,
			SynthesisWindowMaxAttempts: 3,
			ReconcileInterval:          5 * time.Minute,
			ReconcileOverlap:           10 * time.Minute,
			EvidenceRefreshInterval:    time.Hour,
			EvidenceRefreshLookback:    24 * time.Hour,
			EvidenceBatchLimit:         40,
			MaxConcurrentSynthesis:     2,
			Environment:                "production",
			WorkspaceTypes:             []string{"incident"},
			MaxEstimatedTokensPerChunk: 6000,
			MaxMessageTextBytes:        8192,
			EvidenceListedInAPI:        false,
			Retention: Retention{
				Enabled:           true,
				EvidenceRetention: 720 * time.Hour,
				Mode:              RetentionRedact,
				Interval:          time.Hour,
			},
		}}}},
		Kafka: Kafka{
			Brokers:     []string{"127.0.0.1:9092"},
			ClientID:    "larkline",
			GroupPrefix: "larkline",
			Topics: Topics{
				Evidence:      "larkline.evidence.v1",
				WindowsClosed: "larkline.windows.closed.v1",
				Checkpoints:   "larkline.checkpoints.v1",
				Workspaces:    "larkline.workspaces.v1",
				DeadLetter:    "larkline.deadletter.v1",
			},
			Partitions:        12,
			ReplicationFactor: 3,
			ManageTopics:      true,
			Producer: Producer{
				Acks:               AcksAll,
				Linger:             5 * time.Millisecond,
				Idempotent:         true,
				MaxBufferedRecords: 10000,
				Compression:        CompressionSnappy,
			},
			Consumer: Consumer{
				SessionTimeout:   45 * time.Second,
				RebalanceTimeout: time.Minute,
				FetchMaxWait:     500 * time.Millisecond,
			},
			SaramaVersion: "3.6.0",
		},
		Schemas: Schemas{
			Registry:     SchemaRegistry{Timeout: 10 * time.Second},
			AutoRegister: true,
		},
		Postgres: Postgres{
			MaxConns:       10,
			ConnectTimeout: 10 * time.Second,
		},
		Lark: Lark{
			Mode:             LarkModeWebhook,
			OpenBaseURL:      LarkOpenBaseURL,
			WebhookPath:      "/lark/events",
			MaxTimestampSkew: 5 * time.Minute,
			API: LarkAPI{
				RequestsPerSecond:  10,
				Burst:              10,
				MaxConcurrentChats: 4,
				MaxPagesPerRun:     100,
				PageSize:           50,
				MaxRetries:         5,
				MaxBackoff:         30 * time.Second,
			},
		},
		HTTP: HTTP{
			Listen:        "127.0.0.1:8080",
			APIListen:     "127.0.0.1:8081",
			WebhookListen: "127.0.0.1:8082",
			APITokens:     []APIToken{},
		},
		Synthesis: Synthesis{
			Synthesizer: SynthesizerRules,
			OpenAI: OpenAI{
				Timeout:         60 * time.Second,
				MaxRetries:      2,
				MaxOutputTokens: 2048,
			},
			PromptVersion: "openai-timeline-v2", // openai.DefaultPromptVersion
			EvidenceWait:  2 * time.Minute,
		},
		Windows: Windows{ProcessorVersion: "v1", StateDir: "/var/lib/larkline/windows", OversizedVersions: 50_000},
		Lag:     Lag{ClusterName: "default"},
		Log:     Log{Level: "info", Format: "json"},
	}
}

// Origin says where the value at a key path came from: "<file>:<line>",
// "env <VAR>", "file <path>" for a secret read from a *File key, or "default". It is
// "" for a Config not made by Load.
func (c *Config) Origin(path string) string {
	if c.origins == nil {
		return ""
	}
	for {
		if o, ok := c.origins[path]; ok {
			return o
		}
		// kafka.brokers[1] came from wherever kafka.brokers came from.
		i := strings.LastIndexByte(path, '[')
		if i < 0 {
			return "default"
		}
		path = path[:i]
	}
}
