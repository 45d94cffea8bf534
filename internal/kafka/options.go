package kafka

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/larkline/larkline/internal/options"
)

// Acks is how many replicas must acknowledge a produced record.
type Acks string

// Acks values. Only AcksAll is compatible with the idempotent producer.
const (
	AcksAll    Acks = "all"    // every in-sync replica (the default)
	AcksLeader Acks = "leader" // the partition leader only
	AcksNone   Acks = "none"   // no acknowledgement at all
)

// Compression is the codec used for produced record batches.
type Compression string

// Compression values.
const (
	CompressionNone   Compression = "none"
	CompressionGzip   Compression = "gzip"
	CompressionSnappy Compression = "snappy" // the default
	CompressionLZ4    Compression = "lz4"
	CompressionZstd   Compression = "zstd"
)

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Defaults applied by Options.WithDefaults for every zero field.
const (
	// DefaultClientID identifies larkline to the brokers (quotas, request logs).
	DefaultClientID = "larkline"
	// DefaultLinger keeps per-request latency low (the Lark webhook waits for Kafka's
	// acknowledgement) while still batching bursts of a busy chat.
	DefaultLinger = 5 * time.Millisecond
	// DefaultMaxBufferedRecords bounds producer memory: evidence records are a few KiB,
	// so the buffer stays in the tens of MiB. Produce blocks (or fails with the caller's
	// context) once it is full.
	DefaultMaxBufferedRecords = 10_000
	// DefaultCompression is cheap on CPU and understood by every client in the pipeline.
	DefaultCompression = CompressionSnappy
	// DefaultSessionTimeout is Kafka's default group session timeout (45 s).
	DefaultSessionTimeout = 45 * time.Second
	// DefaultRebalanceTimeout is how long members have to finish (and commit) their
	// work when a rebalance starts.
	DefaultRebalanceTimeout = 60 * time.Second
	// maxHeartbeatInterval is both clients' default heartbeat interval (3 s, Kafka's);
	// heartbeatInterval shortens it for short session timeouts.
	maxHeartbeatInterval = 3 * time.Second
	// DefaultFetchMaxWait is how long a fetch waits on the broker for new data; like
	// Kafka's fetch.max.wait.ms (500 ms), shorter than franz-go's 5 s, so a quiet
	// pipeline still reacts within half a second.
	DefaultFetchMaxWait = 500 * time.Millisecond

	maxTimeout = time.Hour
)

// Options is the narrow set of Kafka client settings larkline exposes. The zero value
// of every field except Brokers means "use the documented default"; see WithDefaults.
type Options struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// ClientID is sent with every request. Letters, digits, '.', '_' and '-' only.
	// Default DefaultClientID.
	ClientID string
	// TLS configures encrypted connections. Off unless Enabled.
	TLS TLSOptions
	// SASL configures authentication. Off unless Mechanism is set.
	SASL SASLOptions
	// Producer tunes producing clients; ignored by pure consumers.
	Producer ProducerOptions
	// Consumer tunes consumer-group clients; ignored by pure producers.
	Consumer ConsumerOptions
	// AllowInsecure lets SASL PLAIN run without TLS (the password then crosses the
	// network in clear). Off, that combination is refused (issue #29).
	AllowInsecure bool
}

// TLSOptions configures TLS. Files are PEM encoded and read once, at validation.
type TLSOptions struct {
	// Enabled turns TLS on. Without CAFile the system roots verify the brokers.
	Enabled bool
	// CAFile is a PEM bundle of the certificate authorities that sign broker
	// certificates. Optional.
	CAFile string
	// CertFile and KeyFile are the client certificate and key for mutual TLS; both or
	// neither.
	CertFile string
	KeyFile  string
	// ServerName overrides the name verified in broker certificates. Optional.
	ServerName string
}

// SASLOptions configures SASL authentication.
type SASLOptions struct {
	// Mechanism is "", SASLPlain, SASLScramSHA256, SASLScramSHA512 or
	// SASLOAuthBearer (case-insensitive).
	Mechanism string
	// Username and Password are required by PLAIN and SCRAM. They are never logged.
	Username string
	Password string
	// OAuth is the token source of OAUTHBEARER, and set only with it.
	OAuth OAuthOptions
}

// ProducerOptions tunes producing.
type ProducerOptions struct {
	// Acks is AcksAll (default), AcksLeader or AcksNone. Anything but AcksAll requires
	// DisableIdempotence, because Kafka's idempotent producer needs acks=all.
	Acks Acks
	// DisableIdempotence turns off the idempotent producer (on by default: a retried
	// batch is written once, in order).
	DisableIdempotence bool
	// Linger is how long a partition's batch waits for more records; 0 sends
	// every record at once. nil means DefaultLinger.
	Linger *time.Duration
	// MaxBufferedRecords bounds the records buffered but not yet acknowledged.
	// Default DefaultMaxBufferedRecords.
	MaxBufferedRecords int
	// Compression codec. Default DefaultCompression.
	Compression Compression
	// DeliveryTimeout bounds the time to acknowledgement of one record, retries
	// included (kgo.RecordDeliveryTimeout, like delivery.timeout.ms). 0, the default,
	// sets no limit: a record is bounded by the context it was produced with, which
	// is what every larkline producer passes. Beware: franz-go measures this timeout
	// from Record.Timestamp, so a producer that stamps records with an older time
	// (a Lark message's create time, a backfill) must leave it 0, or its records
	// fail at once with kgo.ErrRecordTimeout.
	DeliveryTimeout time.Duration
	// LargeRecordTopics are the topics this client writes records of up to
	// MaxRecordBytes to (closed windows; dead letters that park one): its batches to
	// them may reach MaxBatchBytes, which their max.message.bytes must allow
	// (DefaultTopicSpecs sets it on the closed-window and dead-letter topics).
	// Batches to every other topic stay within DefaultBatchMaxBytes, which a topic
	// with the broker's default limit accepts. Optional.
	LargeRecordTopics []string
}

// ConsumerOptions tunes consumer groups.
type ConsumerOptions struct {
	// SessionTimeout: a member that does not heartbeat for this long is removed from
	// its group. Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// RebalanceTimeout: how long members may take to rejoin during a rebalance.
	// Default DefaultRebalanceTimeout.
	RebalanceTimeout time.Duration
	// FetchMaxWait: how long the broker holds a fetch waiting for data.
	// Default DefaultFetchMaxWait.
	FetchMaxWait time.Duration
}

// WithDefaults returns o with every zero field replaced by its documented default.
// It does not validate.
func (o Options) WithDefaults() Options {
	o.ClientID = cmp.Or(o.ClientID, DefaultClientID)
	p := &o.Producer
	p.Acks = cmp.Or(p.Acks, AcksAll)
	if p.Linger == nil {
		p.Linger = new(DefaultLinger)
	}
	p.MaxBufferedRecords = cmp.Or(p.MaxBufferedRecords, DefaultMaxBufferedRecords)
	p.Compression = cmp.Or(p.Compression, DefaultCompression)
	c := &o.Consumer
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, DefaultRebalanceTimeout)
	c.FetchMaxWait = cmp.Or(c.FetchMaxWait, DefaultFetchMaxWait)
	o.SASL.Mechanism = strings.ToUpper(strings.TrimSpace(o.SASL.Mechanism))
	return o
}

// validated is the result of validating Options once: defaults applied, TLS material
// loaded, SASL mechanism normalised.
type validated struct {
	o      Options
	tls    *tls.Config
	tokens *tokenSource // OAUTHBEARER only
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

func validate(in Options) (validated, error) {
	o := in.WithDefaults()
	if err := o.problems().Err(ErrInvalidOptions); err != nil {
		return validated{}, err
	}
	tc, err := loadTLS(o.TLS)
	if err != nil {
		return validated{}, err
	}
	v := validated{o: o, tls: tc}
	if o.SASL.Mechanism == SASLOAuthBearer {
		v.tokens = newTokenSource(o.SASL.OAuth)
	}
	return v, nil
}

// Check reports every value of o that breaks the client's rules (after the
// defaults), as an *options.Error naming the fields ("Producer.Acks"), or nil. It
// does no I/O: the TLS files are read, and checked, when a client is built. The
// configuration layer calls it to report a wrong key before anything starts.
func (o Options) Check() error {
	return o.WithDefaults().problems().Err(ErrInvalidOptions)
}

// Session timeout bounds: the broker's default group.min.session.timeout.ms and
// group.max.session.timeout.ms. A broker refuses a member outside its own bounds
// at join; checking the defaults here says so at start, not at the first join.
const (
	MinSessionTimeout = 6 * time.Second
	MaxSessionTimeout = 30 * time.Minute
	// MinFetchMaxWait is franz-go's lower bound of the fetch wait.
	MinFetchMaxWait = 10 * time.Millisecond
)

// problems checks o's values (defaults applied).
func (o Options) problems() *options.Problems {
	bad := new(options.Problems)
	if len(o.Brokers) == 0 {
		bad.Add("Brokers", o.Brokers, "must list at least one broker as host:port")
	}
	for _, b := range o.Brokers {
		if why := brokerProblem(b); why != "" {
			bad.Add("Brokers", b, "%q %s", b, why)
		}
	}
	if why := clientIDProblem(o.ClientID); why != "" {
		bad.Add("ClientID", o.ClientID, "%s", why)
	}
	o.Producer.problems(bad)
	o.Consumer.problems(bad)
	o.SASL.problems(bad)
	o.TLS.problems(bad)
	if o.SASL.Mechanism == SASLPlain && !o.TLS.Enabled && !o.AllowInsecure {
		bad.Add("SASL.Mechanism", o.SASL.Mechanism, "PLAIN without TLS sends the password in clear: enable TLS (or set allowInsecure)")
	}
	if o.SASL.Mechanism == SASLOAuthBearer && !o.TLS.Enabled && !o.AllowInsecure {
		bad.Add("SASL.Mechanism", o.SASL.Mechanism, "OAUTHBEARER without TLS sends the token in clear: enable TLS (or set allowInsecure)")
	}
	if u, err := url.Parse(o.SASL.OAuth.TokenURL); o.SASL.OAuth.TokenURL != "" && err == nil && u.Scheme == "http" &&
		!options.LoopbackHost(u.Hostname()) && !o.AllowInsecure {
		bad.Add("SASL.OAuth.TokenURL", o.SASL.OAuth.TokenURL, "http:// to a host that is not loopback sends the client secret in clear: use https (or set allowInsecure)")
	}
	return bad
}

// problems checks the producer's options.
func (p ProducerOptions) problems(bad *options.Problems) {
	switch p.Acks {
	case AcksAll, AcksLeader, AcksNone:
		if !p.DisableIdempotence && p.Acks != AcksAll {
			bad.Add("Producer.Acks", p.Acks, "must be %s while the producer is idempotent: idempotent producers need every in-sync replica's acknowledgement", AcksAll)
		}
	default:
		bad.Add("Producer.Acks", p.Acks, "must be one of %s, %s, %s", AcksAll, AcksLeader, AcksNone)
	}
	switch {
	case p.Linger == nil:
	case *p.Linger < 0:
		bad.Add("Producer.Linger", *p.Linger, "must not be negative (0: send at once)")
	case *p.Linger > time.Minute:
		bad.Add("Producer.Linger", *p.Linger, "must be at most 1m")
	}
	if p.MaxBufferedRecords < 0 {
		bad.Add("Producer.MaxBufferedRecords", p.MaxBufferedRecords, "must be positive")
	}
	if _, err := kgoCompression(p.Compression); err != nil {
		bad.Add("Producer.Compression", p.Compression, "must be one of none, gzip, snappy, lz4, zstd")
	}
	if p.DeliveryTimeout != 0 && (p.DeliveryTimeout < 0 || p.DeliveryTimeout > maxTimeout) {
		bad.Add("Producer.DeliveryTimeout", p.DeliveryTimeout, "must be within (0, %s]", maxTimeout)
	}
	for _, t := range p.LargeRecordTopics {
		if why := topicNameProblem(t); why != "" {
			bad.Add("Producer.LargeRecordTopics", t, "%s", why)
		}
	}

}

// problems checks the consumer's timeouts.
func (c ConsumerOptions) problems(bad *options.Problems) {
	for _, t := range []struct {
		name   string
		d      time.Duration
		lo, hi time.Duration
		why    string
	}{
		{"Consumer.SessionTimeout", c.SessionTimeout, MinSessionTimeout, MaxSessionTimeout,
			" (the broker's default group.min.session.timeout.ms and group.max.session.timeout.ms)"},
		{"Consumer.RebalanceTimeout", c.RebalanceTimeout, time.Second, maxTimeout, ""},
		{"Consumer.FetchMaxWait", c.FetchMaxWait, MinFetchMaxWait, time.Minute, ""},
	} {
		if t.d < t.lo || t.d > t.hi {
			bad.Add(t.name, t.d, "must be between %s and %s%s", t.lo, t.hi, t.why)
		}
	}
}

// problems checks the mechanism and its credentials.
func (s SASLOptions) problems(bad *options.Problems) {
	switch s.Mechanism {
	case "":
		if s.Username != "" {
			bad.Add("SASL.Username", s.Username, "is set but the SASL mechanism is empty")
		}
		if s.Password != "" {
			bad.Add("SASL.Password", nil, "is set but the SASL mechanism is empty")
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.Username == "" || s.Password == "" {
			bad.Add("SASL.Mechanism", s.Mechanism, "needs a username and a password")
		}
	case SASLOAuthBearer:
		if s.Username != "" || s.Password != "" {
			bad.Add("SASL.Username", s.Username, "is set but OAUTHBEARER takes a token, not a username and password")
		}
		o := s.OAuth
		switch {
		case (o.TokenFile == "") == (o.TokenURL == ""):
			bad.Add("SASL.Mechanism", s.Mechanism, "needs exactly one of a token file and a token endpoint URL")
		case o.TokenURL != "":
			if u, err := url.Parse(o.TokenURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
				bad.Add("SASL.OAuth.TokenURL", o.TokenURL, "must be an absolute http(s) URL without credentials")
			}
			if o.ClientID == "" || o.ClientSecret == "" {
				bad.Add("SASL.OAuth.ClientID", o.ClientID, "and the client secret are needed with a token endpoint")
			}
		case o.ClientID != "" || o.ClientSecret != "" || o.Scope != "":
			bad.Add("SASL.OAuth.ClientID", o.ClientID, "client id, secret and scope go with a token endpoint, not a token file")
		}
	default:
		bad.Add("SASL.Mechanism", s.Mechanism, "must be one of %s, %s, %s, %s", SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer)
	}
	if s.Mechanism != SASLOAuthBearer && s.OAuth != (OAuthOptions{}) {
		bad.Add("SASL.OAuth.TokenFile", s.OAuth.TokenFile, "OAuth token settings are set but the SASL mechanism is not OAUTHBEARER")
	}
}

// problems checks that TLS files come with TLS, and certificate with key.
func (t TLSOptions) problems(bad *options.Problems) {
	if !t.Enabled {
		for _, f := range []struct{ field, v string }{{"TLS.CAFile", t.CAFile}, {"TLS.CertFile", t.CertFile}, {"TLS.KeyFile", t.KeyFile}, {"TLS.ServerName", t.ServerName}} {
			if f.v != "" {
				bad.Add(f.field, f.v, "is set but TLS is not enabled")
			}
		}
	} else {
		if t.CertFile != "" && t.KeyFile == "" {
			bad.Add("TLS.KeyFile", t.KeyFile, "must be set together with the certificate file")
		}
		if t.KeyFile != "" && t.CertFile == "" {
			bad.Add("TLS.CertFile", t.CertFile, "must be set together with the key file")
		}
	}
}

// brokerProblem says what is wrong with a seed broker address, or "".
func brokerProblem(b string) string {
	host, port, err := net.SplitHostPort(b)
	if err != nil {
		return "must be host:port"
	}
	if host == "" {
		return "must name a host, as in host:port"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "must have a port between 1 and 65535"
	}
	return ""
}

// clientIDProblem applies Kafka's (and sarama's) client id rule.
func clientIDProblem(id string) string {
	if len(id) > 255 {
		return "must be at most 255 bytes"
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("has character %q (allowed: letters, digits, . _ -)", r)
		}
	}
	return ""
}

func loadTLS(t TLSOptions) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil // Options.problems refused files without TLS
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, invalid("tls ca file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid("tls ca file %s: no PEM certificate found", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, invalid("tls client certificate: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func kgoCompression(c Compression) (kgo.CompressionCodec, error) {
	switch c {
	case CompressionNone:
		return kgo.NoCompression(), nil
	case CompressionGzip:
		return kgo.GzipCompression(), nil
	case CompressionSnappy:
		return kgo.SnappyCompression(), nil
	case CompressionLZ4:
		return kgo.Lz4Compression(), nil
	case CompressionZstd:
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, invalid("compression %q: want none, gzip, snappy, lz4 or zstd", c)
}

func kgoAcks(a Acks) kgo.Acks {
	switch a {
	case AcksLeader:
		return kgo.LeaderAck()
	case AcksNone:
		return kgo.NoAck()
	}
	return kgo.AllISRAcks()
}

func (s SASLOptions) mechanism() sasl.Mechanism {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()
	}
	return nil
}

// NewClientOptions validates o and returns the franz-go options of a client that can
// produce with larkline's settings and join consumer groups with its timeouts. Append
// GroupConsumerOptions (or kgo.ConsumeTopics for a group-less reader) to consume.
//
// Settings made explicit here, whatever franz-go's defaults are:
//
//   - kgo.RequiredAcks from Producer.Acks (default all in-sync replicas);
//   - idempotent writes on unless Producer.DisableIdempotence (then
//     kgo.DisableIdempotentWrite); idempotence with acks other than all is an error;
//   - kgo.ProducerLinger (default 5 ms), kgo.MaxBufferedRecords (default 10 000),
//     kgo.ProducerBatchCompression (default snappy), kgo.RecordDeliveryTimeout
//     (default 0: bounded by the produce context only; see
//     ProducerOptions.DeliveryTimeout);
//   - kgo.ProducerBatchMaxBytesFn: MaxBatchBytes for Producer.LargeRecordTopics,
//     DefaultBatchMaxBytes for every other topic (see limits.go);
//   - kgo.RecordPartitioner(Partitioner()): the one partitioner;
//   - kgo.AllowAutoTopicCreation is not set: topics are created by EnsureTopics only;
//   - kgo.SessionTimeout (45 s), kgo.HeartbeatInterval (heartbeatInterval: 3 s, a
//     third of a shorter session), kgo.RebalanceTimeout (60 s), kgo.FetchMaxWait
//     (500 ms);
//   - kgo.FetchMaxBytes (FetchMaxBytes), kgo.FetchMaxPartitionBytes
//     (FetchMaxPartitionBytes) and kgo.BrokerMaxReadBytes (BrokerMaxReadBytes): a
//     record batch of up to MaxBatchBytes is read whole;
//   - kgo.FetchIsolationLevel(kgo.ReadCommitted()): larkline does not produce
//     transactionally, so this costs nothing and keeps aborted data out if it ever does;
//   - TLS via kgo.DialTLSConfig and SASL via kgo.SASL when configured.
func NewClientOptions(o Options) ([]kgo.Opt, error) {
	v, err := validate(o)
	if err != nil {
		return nil, err
	}
	return v.kgoOpts(), nil
}

func (v validated) kgoOpts() []kgo.Opt {
	o := v.o
	codec, _ := kgoCompression(o.Producer.Compression) // validated
	linger := *o.Producer.Linger
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.ClientID(o.ClientID),
		kgo.RequiredAcks(kgoAcks(o.Producer.Acks)),
		kgo.ProducerLinger(linger),
		kgo.MaxBufferedRecords(o.Producer.MaxBufferedRecords),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordDeliveryTimeout(o.Producer.DeliveryTimeout),
		kgo.ProducerBatchMaxBytesFn(batchMaxBytes(o.Producer.LargeRecordTopics)),
		kgo.RecordPartitioner(Partitioner()),
		kgo.SessionTimeout(o.Consumer.SessionTimeout),
		kgo.HeartbeatInterval(heartbeatInterval(o.Consumer.SessionTimeout)),
		kgo.RebalanceTimeout(o.Consumer.RebalanceTimeout),
		kgo.FetchMaxWait(o.Consumer.FetchMaxWait),
		kgo.FetchMaxBytes(FetchMaxBytes),
		kgo.FetchMaxPartitionBytes(FetchMaxPartitionBytes),
		kgo.BrokerMaxReadBytes(BrokerMaxReadBytes),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	if o.Producer.DisableIdempotence {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if v.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(v.tls.Clone()))
	}
	if v.tokens != nil {
		opts = append(opts, kgo.SASL(v.tokens.mechanism()))
	} else if m := o.SASL.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// batchMaxBytes is the franz-go batch limit per topic: MaxBatchBytes for the large
// record topics, DefaultBatchMaxBytes for the others.
func batchMaxBytes(large []string) func(topic string) int32 {
	set := make(map[string]bool, len(large))
	for _, t := range large {
		set[t] = true
	}
	return func(topic string) int32 {
		if set[topic] {
			return MaxBatchBytes
		}
		return DefaultBatchMaxBytes
	}
}

// GroupConsumer describes how a franz-go client consumes as a member of a group. The
// zero values are the safe choice for larkline: offsets are committed by the caller
// after its side effects are durable, and a group without a committed offset reads
// its topics from the start (replay).
type GroupConsumer struct {
	// Group is the consumer group id. Required.
	Group string
	// Topics are consumed by the group. At least one.
	Topics []string
	// AutoCommit lets franz-go commit polled offsets in the background. Off by
	// default (kgo.DisableAutoCommit): the caller commits with CommitRecords or
	// CommitUncommittedOffsets after its side effects, so a crash redelivers rather
	// than loses.
	AutoCommit bool
	// StartAtEnd makes a group without a committed offset (or whose committed offset
	// is out of range) start at the end of each partition. Off by default: it starts
	// at the earliest retained record (kgo.ConsumeResetOffset(AtStart)).
	StartAtEnd bool
}

// GroupConsumerOptions validates g and returns the franz-go options that make a client
// built with NewClientOptions a member of g.Group. The balancer is set explicitly to
// the cooperative-sticky balancer (incremental rebalances, fewer revoked partitions).
//
// A caller that commits manually should also commit in kgo.OnPartitionsRevoked what it
// has finished, or accept that the next owner reprocesses it; every larkline consumer
// is idempotent, so reprocessing is correct, only slower.
func GroupConsumerOptions(g GroupConsumer) ([]kgo.Opt, error) {
	if strings.TrimSpace(g.Group) == "" {
		return nil, invalid("consumer group: empty group id")
	}
	if len(g.Topics) == 0 {
		return nil, invalid("consumer group %q: no topics", g.Group)
	}
	for _, t := range g.Topics {
		if err := validateTopicName(t); err != nil {
			return nil, err
		}
	}
	reset := kgo.NewOffset().AtStart()
	if g.StartAtEnd {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(g.Group),
		kgo.ConsumeTopics(g.Topics...),
		kgo.ConsumeResetOffset(reset),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
	}
	if !g.AutoCommit {
		opts = append(opts, kgo.DisableAutoCommit())
	}
	return opts, nil
}

// validateTopicName applies Kafka's topic name rule.
func validateTopicName(t string) error {
	if why := topicNameProblem(t); why != "" {
		return invalid("topic name %q: %s", t, why)
	}
	return nil
}

// topicNameProblem says what breaks Kafka's topic name rule, or "".
func topicNameProblem(t string) string {
	if t == "" || t == "." || t == ".." {
		return "must be a Kafka topic name: 1-249 of letters, digits, '.', '_' or '-'"
	}
	if len(t) > 249 {
		return "must be at most 249 bytes"
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("has character %q (allowed: letters, digits, . _ -)", r)
		}
	}
	return ""
}

// heartbeatInterval is how often a group member heartbeats, for both clients: every
// 3 s, or a third of a shorter session timeout, so that a member learns of a
// rebalance (a dead member's partitions to take over) well within the session.
func heartbeatInterval(session time.Duration) time.Duration {
	return min(maxHeartbeatInterval, session/3)
}
