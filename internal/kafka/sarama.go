package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/larkline/larkline/internal/options"
)

// DefaultProtocolVersion is the Kafka protocol version sarama speaks unless
// GokaOptions.Version says otherwise. Sarama does not negotiate request versions with
// the broker; it derives them from this setting. 3.6.0 is understood by every broker
// larkline targets (Kafka 3.6 through 4.x).
const DefaultProtocolVersion = "3.6.0"

// minProtocolVersion is the lowest accepted GokaOptions.Version, 2.1.0. Kafka 4.0
// removed the request versions older than Kafka 2.1 (KIP-896); a sarama client
// configured below 2.1 may send some of them (against Kafka 4.1, 0.10.2 already fails
// at CreateTopics with the broker closing the connection).
var minProtocolVersion = sarama.V2_1_0_0

// GokaOptions configures the sarama clients Goka builds. It embeds Options so that
// brokers, client id, TLS, SASL and producer and consumer tuning are stated once for
// franz-go and Goka alike.
type GokaOptions struct {
	Options
	// Version is the Kafka protocol version for sarama, "major.minor.patch".
	// Default DefaultProtocolVersion; below 2.1.0 or above what sarama
	// knows (sarama.MaxVersion) is an error.
	Version string
	// TableReplication is the replication factor of group tables Goka creates and
	// checks (<group>-table). Required, >= 1.
	TableReplication int
	// StreamReplication is the replication factor of loop streams Goka creates and
	// checks. Required, >= 1.
	StreamReplication int
	// StreamRetention is retention.ms of loop streams Goka creates (and checks).
	// Default 24h.
	StreamRetention time.Duration
	// Compression is the codec of every batch Goka's producer writes: loop records,
	// group-table changelog records and the processor's own outputs. It is separate
	// from Options.Producer.Compression (the franz-go producers' codec) because a Goka
	// processor's writes are mostly small internal records that it reads back itself a
	// few milliseconds later, where compression costs CPU on both sides and saves
	// little. Default DefaultGokaCompression.
	Compression Compression
	// Logger receives what the topic manager changes on Goka's own topics (it raises
	// a too small max.message.bytes). Nil discards.
	Logger *slog.Logger
	// CheckTopicsOnly stops the topic manager from creating Goka's table and loop
	// topics or changing their configs: it checks that they exist with compatible
	// settings (GokaTopicSpecs; CheckTopics) and fails naming every difference, so
	// the client needs no Create or AlterConfigs (kafka.manageTopics: false).
	CheckTopicsOnly bool
}

// DefaultGokaCompression is GokaOptions.Compression's default: LZ4 compresses and
// decompresses several times faster than snappy in Go (snappy's encoder was a tenth
// of the window processor's CPU), and still shrinks the repetitive closed-window and
// changelog values.
const DefaultGokaCompression = CompressionLZ4

// DefaultStreamRetention is GokaOptions.StreamRetention's default.
const DefaultStreamRetention = 24 * time.Hour

// SaramaConfig validates o and returns the sarama configuration of larkline's Goka
// clients: goka.DefaultConfig with every setting larkline relies on set explicitly
// (saramaConfig says why, line by line). The config is a template: Goka's builders
// write ClientID and Partitioner (from the hasher ProcessorOptions passes) into the
// config they are given, so the option helpers copy it for every client.
func SaramaConfig(o GokaOptions) (*sarama.Config, error) {
	cfg, _, err := saramaConfig(o)
	return cfg, err
}

func saramaConfig(o GokaOptions) (*sarama.Config, validated, error) {
	v, err := validate(o.Options)
	if err != nil {
		return nil, validated{}, err
	}
	cfg, err := v.saramaConfig(o)
	return cfg, v, err
}

// saramaConfig builds the sarama configuration of o. Long on purpose: every
// setting larkline relies on is set explicitly, one per line, because sarama's
// defaults move between releases.
func (v validated) saramaConfig(o GokaOptions) (*sarama.Config, error) {
	bad := new(options.Problems)
	version := o.gokaProblems(bad)
	if err := bad.Err(ErrInvalidOptions); err != nil {
		return nil, err
	}

	opts := v.o
	cfg := goka.DefaultConfig()
	cfg.Version = version // o.Version, default 3.6.0
	cfg.ClientID = opts.ClientID
	// sarama's default is true: topics come from EnsureTopics or Goka's topic manager.
	cfg.Metadata.AllowAutoTopicCreation = false

	p := opts.Producer
	switch p.Acks {
	case AcksAll:
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	case AcksLeader:
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case AcksNone:
		// Goka refuses NoResponse for processors (it needs the offsets), and so do we.
		return nil, invalid("goka producer acks %q: goka needs acknowledged writes", p.Acks)
	}
	// The idempotent producer needs acks=all, retries and one open request; one open
	// request either way, so a retry never overtakes an earlier batch of a chat.
	cfg.Producer.Idempotent = !p.DisableIdempotence
	cfg.Net.MaxOpenRequests = 1
	if *p.Linger == 0 {
		// Send at once: sarama flushes immediately only when every flush trigger is
		// zero. Goka's default config sets Flush.Bytes (64 KiB), which without a
		// frequency would hold small batches until 64 KiB accumulate — forever, for a
		// quiet processor.
		cfg.Producer.Flush.Frequency = 0
		cfg.Producer.Flush.Bytes = 0
		cfg.Producer.Flush.Messages = 0
	} else {
		cfg.Producer.Flush.Frequency = *p.Linger
	}
	gokaCompression := o.Compression
	gokaCompression = cmp.Or(gokaCompression, DefaultGokaCompression)
	cfg.Producer.Compression = saramaCompression(gokaCompression) // not o.Producer.Compression
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	// sarama's default is 1 MiB, per record and per partition batch before
	// compression; loop and table records reach MaxRecordBytes (limits.go).
	cfg.Producer.MaxMessageBytes = MaxBatchBytes

	c := opts.Consumer
	// A new group (a new processor version) reads its inputs from the start.
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.MaxWaitTime = c.FetchMaxWait
	// A larger first batch comes whole anyway (KIP-74) and sarama grows its fetch
	// size on a partial one; Max 0 is bounded by sarama.MaxResponseSize.
	cfg.Consumer.Fetch.Default = 1 << 20
	cfg.Consumer.Fetch.Max = 0
	cfg.Consumer.Group.Session.Timeout = c.SessionTimeout
	cfg.Consumer.Group.Rebalance.Timeout = c.RebalanceTimeout
	cfg.Consumer.Group.Heartbeat.Interval = heartbeatInterval(c.SessionTimeout)
	cfg.Consumer.Return.Errors = true
	// Goka assigns partitions with its copartitioning strategy (all inputs and the
	// group table of one partition number go to one member). goka.DefaultConfig sets
	// it through the deprecated Strategy field, which makes sarama log a deprecation
	// warning on every Validate; state it through GroupStrategies instead.
	cfg.Consumer.Group.Rebalance.Strategy = nil
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{goka.CopartitioningStrategy}

	if v.tls != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = v.tls.Clone()
	}
	if s := opts.SASL; s.Mechanism != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.Version = sarama.SASLHandshakeV1
		cfg.Net.SASL.User = s.Username
		cfg.Net.SASL.Password = s.Password
		switch s.Mechanism {
		case SASLOAuthBearer:
			cfg.Net.SASL.Mechanism = sarama.SASLTypeOAuth
			cfg.Net.SASL.TokenProvider = saramaTokens{v.tokens}
		case SASLPlain:
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case SASLScramSHA256:
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{sha512: false} }
		case SASLScramSHA512:
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{sha512: true} }
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: sarama rejected the configuration: %w", ErrInvalidOptions, err)
	}
	return cfg, nil
}

// Check reports every value of o that breaks the rules of the clients Goka builds
// (the embedded Options' and Goka's own), as an *options.Error naming the fields,
// or nil. It does no I/O.
func (o GokaOptions) Check() error {
	p := o.Options.WithDefaults().problems()
	o.gokaProblems(p)
	return p.Err(ErrInvalidOptions)
}

// gokaProblems adds the problems of Goka's own options to p and returns the
// protocol version (zero when it is one of them).
func (o GokaOptions) gokaProblems(p *options.Problems) sarama.KafkaVersion {
	version, why := parseProtocolVersion(o.Version)
	if why != "" {
		p.Add("Version", o.Version, "%s", why)
	}
	if o.TableReplication < 1 || o.TableReplication > 32767 {
		p.Add("TableReplication", o.TableReplication, "must be between 1 and 32767")
	}
	if o.StreamReplication < 1 || o.StreamReplication > 32767 {
		p.Add("StreamReplication", o.StreamReplication, "must be between 1 and 32767")
	}
	switch o.Compression {
	case "", CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd:
	default:
		p.Add("Compression", o.Compression, "must be one of none, gzip, snappy, lz4, zstd")
	}
	if o.StreamRetention < 0 {
		p.Add("StreamRetention", o.StreamRetention, "must not be negative")
	}
	return version
}

// parseProtocolVersion parses a sarama protocol version ("" is the default), or
// says what is wrong with it.
func parseProtocolVersion(s string) (sarama.KafkaVersion, string) {
	s = cmp.Or(s, DefaultProtocolVersion)
	v, err := sarama.ParseKafkaVersion(s)
	switch {
	case err != nil:
		return sarama.KafkaVersion{}, "must be a Kafka version such as 3.6.0"
	case !v.IsAtLeast(minProtocolVersion):
		return sarama.KafkaVersion{}, fmt.Sprintf("must be at least %s: Kafka 4 removed the older protocol versions", minProtocolVersion)
	case !sarama.MaxVersion.IsAtLeast(v):
		return sarama.KafkaVersion{}, fmt.Sprintf("must be at most %s, the newest sarama knows", sarama.MaxVersion)
	}
	return v, ""
}

func saramaCompression(c Compression) sarama.CompressionCodec {
	switch c {
	case CompressionGzip:
		return sarama.CompressionGZIP
	case CompressionSnappy:
		return sarama.CompressionSnappy
	case CompressionLZ4:
		return sarama.CompressionLZ4
	case CompressionZstd:
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

// Goka holds the validated sarama template and topic-manager settings and hands out
// the Goka options that install them. Build it once with NewGoka and share it.
type Goka struct {
	cfg       *sarama.Config
	tmc       *goka.TopicManagerConfig
	id        string
	kopt      []kgo.Opt // franz-go options of the topic manager's admin client
	log       *slog.Logger
	checkOnly bool
}

// NewGoka validates o (see SaramaConfig) and prepares the Goka options.
func NewGoka(o GokaOptions) (*Goka, error) {
	cfg, v, err := saramaConfig(o)
	if err != nil {
		return nil, err
	}
	tmc := goka.NewTopicManagerConfig()
	tmc.Table.Replication = o.TableReplication
	tmc.Table.CleanupPolicy = CleanupCompact
	tmc.Stream.Replication = o.StreamReplication
	tmc.Stream.CleanupPolicy = CleanupDelete
	tmc.Stream.Retention = o.StreamRetention
	tmc.Stream.Retention = cmp.Or(tmc.Stream.Retention, DefaultStreamRetention)
	// A group table with the wrong partition count or replication would silently
	// break co-partitioning; refuse to start instead.
	tmc.MismatchBehavior = goka.TMConfigMismatchBehaviorFail
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Goka{cfg: cfg, tmc: tmc, id: cfg.ClientID, kopt: v.kgoOpts(), log: log, checkOnly: o.CheckTopicsOnly}, nil
}

// SaramaConfig returns a copy of the sarama template.
func (g *Goka) SaramaConfig() *sarama.Config { return cloneConfig(g.cfg) }

// cloneConfig copies the template. Goka's builders assign ClientID and Partitioner on
// the config they receive; a copy per client keeps concurrent builds from racing.
func cloneConfig(c *sarama.Config) *sarama.Config {
	cp := *c
	return &cp
}

// emitterProducerBuilder builds the emitters' producers: sarama's. An emitter is
// long-lived and its emits are synchronous, so it does not halt.
func (g *Goka) emitterProducerBuilder() goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		return goka.ProducerBuilderWithConfig(cloneConfig(g.cfg))(brokers, clientID, hasher)
	}
}

// producerBuilder builds the processors' producers: sarama's, halting after a failed
// produce (haltingProducer).
func (g *Goka) producerBuilder() goka.ProducerBuilder {
	return func(brokers []string, clientID string, hasher func() hash.Hash32) (goka.Producer, error) {
		p, err := goka.ProducerBuilderWithConfig(cloneConfig(g.cfg))(brokers, clientID, hasher)
		if err != nil {
			return nil, err
		}
		return newHaltingProducer(p), nil
	}
}

func (g *Goka) consumerGroupBuilder() goka.ConsumerGroupBuilder {
	return func(brokers []string, group, clientID string) (sarama.ConsumerGroup, error) {
		return goka.ConsumerGroupBuilderWithConfig(cloneConfig(g.cfg))(brokers, group, clientID)
	}
}

func (g *Goka) consumerBuilder() goka.SaramaConsumerBuilder {
	return func(brokers []string, clientID string) (sarama.Consumer, error) {
		return goka.SaramaConsumerBuilderWithConfig(cloneConfig(g.cfg))(brokers, clientID)
	}
}

func (g *Goka) topicManagerBuilder() goka.TopicManagerBuilder {
	return func(brokers []string) (goka.TopicManager, error) {
		cfg := cloneConfig(g.cfg)
		cfg.ClientID = g.id + "-topic-manager"
		tmc := *g.tmc
		tm, err := goka.TopicManagerBuilderWithConfig(cfg, &tmc)(brokers)
		if err != nil {
			return nil, err
		}
		return newGokaTopicManager(tm, g, brokers)
	}
}

// ProcessorOptions returns the options that make a Goka processor use larkline's
// sarama configuration, topic manager and partition hasher. Append processor-specific
// options (storage, logger, callbacks) after them.
func (g *Goka) ProcessorOptions() []goka.ProcessorOption {
	return []goka.ProcessorOption{
		goka.WithClientID(g.id),
		goka.WithProducerBuilder(g.producerBuilder()),
		goka.WithConsumerGroupBuilder(g.consumerGroupBuilder()),
		goka.WithConsumerSaramaBuilder(g.consumerBuilder()),
		goka.WithTopicManagerBuilder(g.topicManagerBuilder()),
		goka.WithHasher(Hasher()),
	}
}

// EmitterOptions returns the options that make a Goka emitter use larkline's sarama
// configuration and partition hasher.
func (g *Goka) EmitterOptions() []goka.EmitterOption {
	return []goka.EmitterOption{
		goka.WithEmitterClientID(g.id),
		goka.WithEmitterProducerBuilder(g.emitterProducerBuilder()),
		goka.WithEmitterTopicManagerBuilder(g.topicManagerBuilder()),
		goka.WithEmitterHasher(Hasher()),
	}
}

// ViewOptions returns the options that make a Goka view use larkline's sarama
// configuration and partition hasher (so View.Get finds a key's partition).
func (g *Goka) ViewOptions() []goka.ViewOption {
	return []goka.ViewOption{
		goka.WithViewClientID(g.id),
		goka.WithViewConsumerSaramaBuilder(g.consumerBuilder()),
		goka.WithViewTopicManagerBuilder(g.topicManagerBuilder()),
		goka.WithViewHasher(Hasher()),
	}
}

// scramClient adapts franz-go's SCRAM implementation to sarama.SCRAMClient, so the
// sarama side needs no SCRAM library of its own.
type scramClient struct {
	sha512 bool
	sess   sasl.Session
	first  []byte
	step   int
	done   bool
}

var errSCRAMNotBegun = errors.New("scram: Step called before Begin")

func (c *scramClient) Begin(user, password, authzID string) error {
	a := scram.Auth{User: user, Pass: password, Zid: authzID}
	m := a.AsSha256Mechanism()
	if c.sha512 {
		m = a.AsSha512Mechanism()
	}
	sess, first, err := m.Authenticate(context.Background(), "")
	if err != nil {
		return fmt.Errorf("starting %s: %w", m.Name(), err)
	}
	c.sess, c.first, c.step, c.done = sess, first, 0, false
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) {
	if c.sess == nil {
		return "", errSCRAMNotBegun
	}
	c.step++
	if c.step == 1 {
		return string(c.first), nil
	}
	done, resp, err := c.sess.Challenge([]byte(challenge))
	if err != nil {
		return "", err
	}
	c.done = done
	return string(resp), nil
}

func (c *scramClient) Done() bool { return c.done }
