package synthesis

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/synthesis/synth"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Defaults applied by New for zero Options fields. The design's values (§14, §18) where
// it names one.
const (
	// DefaultGroup is the consumer group of the synthesis worker.
	DefaultGroup = "larkline-synthesis"
	// DefaultContextLookback is synthesisContextLookback: how far before a window its
	// read-only context reaches.
	DefaultContextLookback = 5 * time.Minute
	// DefaultStaleTimeout is synthesisStaleTimeout.
	DefaultStaleTimeout = 15 * time.Minute
	// MinStaleTimeout is the shortest StaleTimeout: the heartbeat, every third of it,
	// makes a database write at most once a second.
	MinStaleTimeout = 3 * time.Second
	// DefaultMaxAttempts is synthesisWindowMaxAttempts.
	DefaultMaxAttempts = 3
	// DefaultScanInterval is synthesisScanInterval: the period of the stale sweep.
	DefaultScanInterval = 2 * time.Minute
	// DefaultEvidenceBatchLimit is evidenceBatchLimit: evidence per chunk.
	DefaultEvidenceBatchLimit = 40
	// DefaultMaxEstimatedTokensPerChunk is maxEstimatedTokensPerChunk.
	DefaultMaxEstimatedTokensPerChunk = 6000
	// DefaultMaxConcurrentSynthesis is maxConcurrentSynthesis.
	DefaultMaxConcurrentSynthesis = 2
	// DefaultProximityGap joins otherwise unrelated messages into one conversation
	// when they follow each other within it (§12.2 step 4).
	DefaultProximityGap = 2 * time.Minute
	// DefaultEvidenceWait is EvidenceWait's default.
	DefaultEvidenceWait = 2 * time.Minute
	// DefaultChunkTimeout bounds one Synthesize call.
	DefaultChunkTimeout = 3 * time.Minute
	// DefaultChunkRetries is how often a chunk is retried after a retryable model
	// failure within one whole-window attempt.
	DefaultChunkRetries = 2
	// DefaultRetryBackoffMin and DefaultRetryBackoffMax bound every backoff of the
	// worker (chunk retries, window retries, store outages, busy polling).
	DefaultRetryBackoffMin = time.Second
	DefaultRetryBackoffMax = 30 * time.Second
	// DefaultModelOutageBackoffMax caps the pause of the model gate between probes of
	// an unavailable model.
	DefaultModelOutageBackoffMax = 2 * time.Minute
	// DefaultSummaryTimeout bounds the one summary attempt of a window.
	DefaultSummaryTimeout = 2 * time.Minute
	// DefaultDrainTimeout bounds how long Run keeps finishing in-flight windows after
	// its context ends.
	DefaultDrainTimeout = 30 * time.Second
	// DefaultMaxInFlightRecords bounds the closed-window records held in memory.
	DefaultMaxInFlightRecords = 256
	// DefaultSweepLimit bounds the stale windows one sweep reclaims.
	DefaultSweepLimit = 100
	// DefaultExistingEntriesLookback is how far before a window the existing entries
	// given to a synthesizer reach.
	DefaultExistingEntriesLookback = time.Hour
	// DefaultMaxExistingEntries bounds the existing entries given per chunk.
	DefaultMaxExistingEntries = 20
	// DefaultMaxContextMessages bounds the read-only context messages per chunk.
	DefaultMaxContextMessages = 40

	// MaxEvidenceBatchLimit is the largest EvidenceBatchLimit (one store page).
	MaxEvidenceBatchLimit = store.MaxPageSize
	// MaxConcurrency is the largest MaxConcurrentSynthesis accepted.
	MaxConcurrency = 64
	// minTokensPerChunk is the smallest token budget accepted: one message's overhead
	// and some text.
	minTokensPerChunk = 4 * synth.MessageOverheadTokens
)

var (
	// ErrInvalidOptions is wrapped by every error New returns for bad Options.
	ErrInvalidOptions = errors.New("synthesis: invalid options")
	// ErrClosed is returned by Run after Close.
	ErrClosed = errors.New("synthesis: worker closed")
	// ErrAlreadyRunning is returned by a second call of Run.
	ErrAlreadyRunning = lifecycle.ErrAlreadyRunning
	// ErrFatal is wrapped by the errors that stop Run: a Kafka client that cannot be
	// created, or that closed underneath the worker.
	ErrFatal = errors.New("synthesis: fatal error")
	// ErrKeyMismatch is the cause recorded for a closed-window record whose Kafka key
	// is not <workspace>/<chat> of its value; such a record is dead-lettered.
	ErrKeyMismatch = errors.New("record key does not match the closed window")
	// ErrInvalidWindow is the cause recorded for a closed window the store cannot hold
	// (a start not aligned to its length); such a record is dead-lettered.
	ErrInvalidWindow = errors.New("closed window is not a valid window")
)

// Store is what the worker reads and writes in Postgres; *store.Store implements it.
type Store interface {
	GetWindow(ctx context.Context, key store.WindowKey) (store.WindowState, error)
	ClaimWindow(ctx context.Context, key store.WindowKey, opts store.ClaimOptions) (store.WindowState, store.ClaimOutcome, error)
	AdvanceWindowCursor(ctx context.Context, lease store.WindowLease, p store.ChunkProgress) (store.WindowState, error)
	FinishWindow(ctx context.Context, lease store.WindowLease, to store.WindowStatus, mutate func(*store.WindowState)) (store.WindowState, error)
	FinishWindowAfterChunk(ctx context.Context, lease store.WindowLease, p store.ChunkProgress, to store.WindowStatus, mutate func(*store.WindowState)) (store.WindowState, error)
	RefundWindowAttempt(ctx context.Context, lease store.WindowLease, mutate func(*store.WindowState)) (store.WindowState, error)
	HeartbeatWindow(ctx context.Context, lease store.WindowLease) error
	MarkWindowNeedsAttention(ctx context.Context, key store.WindowKey, opts store.ClaimOptions, diagnostics string) (store.WindowState, bool, error)
	StaleProcessing(ctx context.Context, staleAfter time.Duration, limit int) ([]store.WindowState, error)

	EvidenceInRange(ctx context.Context, q store.RangeQuery) (store.EvidencePage, error)
	EvidenceByKeys(ctx context.Context, ws ids.WorkspaceID, kind store.EvidenceKind, sourceKeys []string) ([]store.Evidence, error)

	UpsertDraftEntries(ctx context.Context, ds []store.EntryDraft) ([]store.EntryResult, error)
	ListEntries(ctx context.Context, ws ids.WorkspaceID, q store.EntryQuery) (store.EntryPage, error)
	// The reads and writes below are in the window's processor version's view: a
	// candidate's summary and entries are its own (decisions D26).
	VersionVisibleEntries(ctx context.Context, ws ids.WorkspaceID, version string) ([]store.Entry, error)

	VersionSummaryInput(ctx context.Context, ws ids.WorkspaceID, version string, entries bool) (store.SummaryInput, error)
	PutAISummary(ctx context.Context, ws ids.WorkspaceID, version, text string, meta json.RawMessage) (bool, error)
}

var _ Store = (*store.Store)(nil)

// Options configure a Worker. Kafka.Brokers, Store, Codecs and Synthesizer are
// required; every other zero field takes the documented default.
type Options struct {
	// Kafka holds brokers, security, the dead-letter producer settings and the group
	// timeouts (package kafka validates it).
	Kafka kafka.Options
	// Group is the consumer group id. Default DefaultGroup.
	Group string
	// Topic is the closed-window topic consumed. Default kafka.DefaultTopicNames().WindowsClosed.
	Topic string
	// DeadLetterTopic receives closed-window records that cannot be decoded. Default
	// kafka.DefaultTopicNames().DeadLetter.
	DeadLetterTopic string

	// Store is the repository. Required; the caller owns its pool.
	Store Store
	// Codecs decode closed windows and encode dead letters. Required.
	Codecs *schemas.Codecs
	// Synthesizer turns chunks into drafts. Required.
	Synthesizer synth.Synthesizer
	// Summarizer writes the workspace summary after a completed window; nil turns
	// summaries off (counted as skipped, reason "disabled").
	Summarizer synth.Summarizer
	// PromptVersion is recorded in a window's state when it is claimed; the
	// synthesizer's own Result.PromptVersion replaces it when the window finishes.
	PromptVersion string
	// Versions, when set, gives the processor versions that have their own synthesis
	// (decisions D31) their synthesizer, summarizer, prompt version and chunk budget;
	// a version it has none for, and every version when it is nil, synthesizes with
	// Synthesizer, Summarizer and PromptVersion above.
	Versions VersionSettings

	// ContextLookback is synthesisContextLookback. Default DefaultContextLookback.
	ContextLookback time.Duration
	// StaleTimeout is synthesisStaleTimeout: a processing window not written for this
	// long is taken over. A live attempt refreshes its claim every StaleTimeout/3 (the
	// heartbeat), so it need not exceed a chunk's duration; it bounds how long a dead
	// worker's window waits for its takeover. At least MinStaleTimeout. Default
	// DefaultStaleTimeout.
	StaleTimeout time.Duration
	// MaxAttempts is synthesisWindowMaxAttempts. Default DefaultMaxAttempts.
	MaxAttempts int
	// ScanInterval is the period of the stale-processing sweep. Default DefaultScanInterval.
	ScanInterval time.Duration
	// EvidenceBatchLimit is the evidence count per chunk. Default
	// DefaultEvidenceBatchLimit, at most MaxEvidenceBatchLimit.
	EvidenceBatchLimit int
	// MaxEstimatedTokensPerChunk is the estimated prompt budget of one chunk: its
	// messages, its read-only context and the existing entries given with it.
	// Default DefaultMaxEstimatedTokensPerChunk.
	MaxEstimatedTokensPerChunk int
	// MaxConcurrentSynthesis bounds windows processed at once by this worker; at most
	// one window per workspace runs at a time whatever this says. Default
	// DefaultMaxConcurrentSynthesis, at most MaxConcurrency.
	MaxConcurrentSynthesis int
	// ProximityGap joins unrelated messages into one conversation. Default DefaultProximityGap.
	ProximityGap time.Duration
	// EvidenceWait is the period after which a closed window's wait for the sink's
	// commit of its evidence range is counted and logged; the wait goes on and
	// spends no attempt. Default DefaultEvidenceWait.
	EvidenceWait time.Duration
	// SinkProgress reads the evidence sink's committed offsets (KadmSinkProgress). Without it such a window is synthesized from what
	// the evidence table holds when it is claimed.
	SinkProgress SinkProgress
	// ChunkTimeout bounds one Synthesize call. Default DefaultChunkTimeout.
	ChunkTimeout time.Duration
	// ChunkRetries bounds the retries of a chunk after a retryable model failure
	// within one attempt: nil means DefaultChunkRetries, 0 none; at most 10.
	ChunkRetries *int
	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff (with jitter).
	RetryBackoffMin time.Duration
	RetryBackoffMax time.Duration
	// ModelOutageBackoffMax caps the model gate's pause during a model outage: when a
	// chunk used up its ChunkRetries on outage errors (synth.IsRetryable, invalid output
	// aside) the gate opens for RetryBackoffMin, doubling with every failed probe up to
	// this (with jitter); windows wait for it without a claim and the failed attempt is
	// not counted against MaxAttempts. At least RetryBackoffMin, at most 1h. Default
	// DefaultModelOutageBackoffMax (or RetryBackoffMin when that is larger).
	ModelOutageBackoffMax time.Duration
	// SummaryTimeout bounds the one summary attempt. Default DefaultSummaryTimeout.
	SummaryTimeout time.Duration
	// DrainTimeout bounds how long Run keeps finishing in-flight windows after its
	// context ends; windows still running then are released (failed, retried later).
	// Default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// MaxInFlightRecords bounds the polled records not yet committed. Default
	// DefaultMaxInFlightRecords.
	MaxInFlightRecords int
	// SweepLimit bounds the stale windows one sweep reclaims. Default DefaultSweepLimit.
	SweepLimit int
	// ExistingEntriesLookback and MaxExistingEntries select the existing entries
	// given to a synthesizer with each chunk. Default DefaultExistingEntriesLookback;
	// MaxExistingEntries nil means DefaultMaxExistingEntries, 0 none (no entries are
	// read); at most store.MaxPageSize.
	ExistingEntriesLookback time.Duration
	MaxExistingEntries      *int
	// MaxContextMessages bounds the read-only context messages per chunk: nil means
	// DefaultMaxContextMessages, 0 none (a chunk gets no context and its whole budget
	// goes to primary evidence); at most store.MaxPageSize.
	MaxContextMessages *int

	// Clock reads the time for metrics and dead letters. Default time.Now.
	Clock func() time.Time
	// Logger receives ids, keys, counts and hashes only. Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_synthesis_* and larkline_synthesis_summary_* metrics. Nil
	// registers nothing.
	Registry *prometheus.Registry

	// afterClaim, when set (tests only), runs right after a window was claimed; an
	// error abandons the attempt without any further write, as a crash would.
	afterClaim func(ctx context.Context, st store.WindowState) error
}

func (o Options) withDefaults() Options {
	names := kafka.DefaultTopicNames()
	o.Kafka = o.Kafka.WithDefaults()
	o.Group = cmp.Or(o.Group, DefaultGroup)
	o.Topic = cmp.Or(o.Topic, names.WindowsClosed)
	o.DeadLetterTopic = cmp.Or(o.DeadLetterTopic, names.DeadLetter)
	// A dead letter may park a whole closed-window record (up to
	// kafka.MaxRecordBytes): the producer may write batches of up to
	// kafka.MaxBatchBytes to the dead-letter topic, which DefaultTopicSpecs allows.
	if !slices.Contains(o.Kafka.Producer.LargeRecordTopics, o.DeadLetterTopic) {
		o.Kafka.Producer.LargeRecordTopics = append(slices.Clone(o.Kafka.Producer.LargeRecordTopics), o.DeadLetterTopic)
	}
	o.ContextLookback = cmp.Or(o.ContextLookback, DefaultContextLookback)
	o.StaleTimeout = cmp.Or(o.StaleTimeout, DefaultStaleTimeout)
	o.MaxAttempts = cmp.Or(o.MaxAttempts, DefaultMaxAttempts)
	o.ScanInterval = cmp.Or(o.ScanInterval, DefaultScanInterval)
	o.EvidenceBatchLimit = cmp.Or(o.EvidenceBatchLimit, DefaultEvidenceBatchLimit)
	o.MaxEstimatedTokensPerChunk = cmp.Or(o.MaxEstimatedTokensPerChunk, DefaultMaxEstimatedTokensPerChunk)
	o.MaxConcurrentSynthesis = cmp.Or(o.MaxConcurrentSynthesis, DefaultMaxConcurrentSynthesis)
	o.ProximityGap = cmp.Or(o.ProximityGap, DefaultProximityGap)
	o.EvidenceWait = cmp.Or(o.EvidenceWait, DefaultEvidenceWait)
	o.ChunkTimeout = cmp.Or(o.ChunkTimeout, DefaultChunkTimeout)
	if o.ChunkRetries == nil {
		o.ChunkRetries = new(DefaultChunkRetries)
	}
	o.RetryBackoffMin = cmp.Or(o.RetryBackoffMin, DefaultRetryBackoffMin)
	o.RetryBackoffMax = cmp.Or(o.RetryBackoffMax, max(DefaultRetryBackoffMax, o.RetryBackoffMin))
	o.ModelOutageBackoffMax = cmp.Or(o.ModelOutageBackoffMax, max(DefaultModelOutageBackoffMax, o.RetryBackoffMin))
	o.SummaryTimeout = cmp.Or(o.SummaryTimeout, DefaultSummaryTimeout)
	o.DrainTimeout = cmp.Or(o.DrainTimeout, DefaultDrainTimeout)
	o.MaxInFlightRecords = cmp.Or(o.MaxInFlightRecords, DefaultMaxInFlightRecords)
	o.SweepLimit = cmp.Or(o.SweepLimit, DefaultSweepLimit)
	o.ExistingEntriesLookback = cmp.Or(o.ExistingEntriesLookback, DefaultExistingEntriesLookback)
	if o.MaxExistingEntries == nil {
		o.MaxExistingEntries = new(DefaultMaxExistingEntries)
	}
	if o.MaxContextMessages == nil {
		o.MaxContextMessages = new(DefaultMaxContextMessages)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Check reports every value of o that breaks the worker's rules (after the
// defaults), as an *options.Error naming the fields, or nil. It ignores the
// dependencies (Store, Codecs, Synthesizer), which New checks too. The
// configuration layer calls it to report a wrong key before anything starts.
func (o Options) Check() error {
	p := o.withDefaults().problems()
	return p.Err(ErrInvalidOptions)
}

// validate checks o (with defaults applied) and reports every problem at once.
func (o Options) validate() error {
	p := o.problems()
	if o.Store == nil {
		p.Add("Store", nil, "is required")
	}
	if o.Codecs == nil || o.Codecs.ClosedWindow == nil || o.Codecs.DeadLetter == nil {
		p.Add("Codecs", nil, "(closed window and dead letter) are required")
	}
	if o.Synthesizer == nil {
		p.Add("Synthesizer", nil, "is required")
	}
	return p.Err(ErrInvalidOptions)
}

// problems checks o's values (defaults applied).
func (o Options) problems() *options.Problems {
	p := new(options.Problems)
	within := func(name string, d, limit time.Duration) {
		if d <= 0 || d > limit {
			p.Add(name, d, "must be positive and at most %s", limit)
		}
	}
	between := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			p.Add(name, v, "must be between %d and %d", lo, hi)
		}
	}
	if strings.TrimSpace(o.Group) == "" {
		p.Add("Group", o.Group, "must not be blank")
	}
	if o.Topic == o.DeadLetterTopic {
		p.Add("DeadLetterTopic", o.DeadLetterTopic, "must differ from the closed-window topic")
	}
	if len(o.PromptVersion) > 64 {
		p.Add("PromptVersion", o.PromptVersion, "must be at most 64 bytes")
	}
	within("ContextLookback", o.ContextLookback, 24*time.Hour)
	within("StaleTimeout", o.StaleTimeout, 24*time.Hour)
	if o.StaleTimeout > 0 && o.StaleTimeout < MinStaleTimeout {
		p.Add("StaleTimeout", o.StaleTimeout, "must be at least %s: a live worker's heartbeat refreshes its claim every third of it", MinStaleTimeout)
	}
	between("MaxAttempts", o.MaxAttempts, 1, 100)
	within("ScanInterval", o.ScanInterval, 24*time.Hour)
	between("EvidenceBatchLimit", o.EvidenceBatchLimit, 1, MaxEvidenceBatchLimit)
	if o.MaxEstimatedTokensPerChunk < minTokensPerChunk {
		p.Add("MaxEstimatedTokensPerChunk", o.MaxEstimatedTokensPerChunk, "must be at least %d", minTokensPerChunk)
	}
	between("MaxConcurrentSynthesis", o.MaxConcurrentSynthesis, 1, MaxConcurrency)
	within("ProximityGap", o.ProximityGap, 24*time.Hour)
	within("EvidenceWait", o.EvidenceWait, 24*time.Hour)
	within("ChunkTimeout", o.ChunkTimeout, time.Hour)
	if o.ChunkRetries != nil && (*o.ChunkRetries < 0 || *o.ChunkRetries > 10) {
		p.Add("ChunkRetries", *o.ChunkRetries, "must be between 0 and 10 (0: no retries)")
	}
	if o.RetryBackoffMin <= 0 || o.RetryBackoffMax < o.RetryBackoffMin || o.RetryBackoffMax > time.Hour {
		p.Add("RetryBackoffMax", o.RetryBackoffMax, "must satisfy 0 < RetryBackoffMin (%s) <= RetryBackoffMax <= 1h", o.RetryBackoffMin)
	}
	if o.ModelOutageBackoffMax < o.RetryBackoffMin || o.ModelOutageBackoffMax > time.Hour {
		p.Add("ModelOutageBackoffMax", o.ModelOutageBackoffMax, "must be within [RetryBackoffMin (%s), 1h]", o.RetryBackoffMin)
	}
	within("SummaryTimeout", o.SummaryTimeout, time.Hour)
	if o.DrainTimeout < 0 || o.DrainTimeout > time.Hour {
		p.Add("DrainTimeout", o.DrainTimeout, "must be within [0, 1h]")
	}
	between("MaxInFlightRecords", o.MaxInFlightRecords, 1, 100_000)
	between("SweepLimit", o.SweepLimit, 1, store.MaxPageSize)
	within("ExistingEntriesLookback", o.ExistingEntriesLookback, 30*24*time.Hour)
	if o.MaxExistingEntries != nil && (*o.MaxExistingEntries < 0 || *o.MaxExistingEntries > store.MaxPageSize) {
		p.Add("MaxExistingEntries", *o.MaxExistingEntries, "must be between 0 and %d (0: none)", store.MaxPageSize)
	}
	if o.MaxContextMessages != nil && (*o.MaxContextMessages < 0 || *o.MaxContextMessages > store.MaxPageSize) {
		p.Add("MaxContextMessages", *o.MaxContextMessages, "must be between 0 and %d (0: none)", store.MaxPageSize)
	}
	return p
}
