package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/connectors/lark/bindings"
	"github.com/larkline/larkline/connectors/lark/chats"
	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/ingest"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Defaults of Options (design §14, §18; configuration keys in parentheses).
const (
	// DefaultIngestionLookback caps every range at now − 72 h (ingestionLookback).
	DefaultIngestionLookback = 72 * time.Hour
	// DefaultReconcileInterval is the period of automatic passes (reconcileInterval).
	DefaultReconcileInterval = 5 * time.Minute
	// DefaultReconcileOverlap is how far an incremental run re-reads before the
	// checkpoint (reconcileOverlap).
	DefaultReconcileOverlap = 10 * time.Minute
	// DefaultEvidenceRefreshInterval is how often a chat gets the larger
	// edit/delete refresh run (evidenceRefreshInterval).
	DefaultEvidenceRefreshInterval = time.Hour
	// DefaultEvidenceRefreshLookback is how far a refresh run re-reads
	// (evidenceRefreshLookback).
	DefaultEvidenceRefreshLookback = 24 * time.Hour
	// DefaultSettle keeps the end of every range this far behind now, so that a
	// message Lark is still committing is not declared covered.
	DefaultSettle = 5 * time.Second
	// DefaultCoverageMargin: a coverage pass starts this long after its window's end
	// plus Settle, so that its first run's range already reaches the window's end
	// (range ends are now − Settle rounded down to whole seconds; window ends are
	// whole minutes).
	DefaultCoverageMargin = 100 * time.Millisecond

	// DefaultRequestsPerSecond and DefaultBurst are the client-side token bucket
	// of the app (lark.api.requestsPerSecond, lark.api.burst).
	DefaultRequestsPerSecond = 10
	DefaultBurst             = 10
	// DefaultMaxConcurrentChats bounds chats reconciled at once
	// (lark.api.maxConcurrentChats).
	DefaultMaxConcurrentChats = 4
	// DefaultMaxPagesPerRun bounds history pages (chat and thread) read per chat
	// per automatic run (lark.api.maxPagesPerRun).
	DefaultMaxPagesPerRun = 100
	// DefaultMaxPagesPerManualRefresh bounds pages per chat of a manual Refresh,
	// which reads a workspace's whole bounded range.
	DefaultMaxPagesPerManualRefresh = 1000
	// DefaultPageSize is the page_size of history calls (lark.api.pageSize).
	DefaultPageSize = MaxPageSize
	// DefaultMaxRetries is the retries of one history call after a rate limit or a
	// server error (lark.api.maxRetries).
	DefaultMaxRetries = 5
	// DefaultMinBackoff and DefaultMaxBackoff bound the exponential backoff
	// (lark.api.maxBackoff is the cap).
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultRequestTimeout bounds one history call (the SDK sets none).
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxThreadsPerChat bounds the known threads of a chat re-read by every
	// run (the most recently active first).
	DefaultMaxThreadsPerChat = 50
	// DefaultThreadActiveWindow: incremental runs re-read the known threads whose
	// newest message is this recent; refresh and manual runs re-read them all.
	// Each such thread costs one call per run (BenchmarkReconcileAPICalls).
	DefaultThreadActiveWindow = 30 * time.Minute
	// DefaultDrainTimeout bounds how long Run waits, once stopped, for chat runs
	// to finish their current page before cancelling them.
	DefaultDrainTimeout = 30 * time.Second

	// MaxPageSize is Lark's largest page_size (larkapi.MaxPageSize).
	MaxPageSize = larkapi.MaxPageSize
	// MaxRequestsPerSecond is Lark's per-app limit of the history API
	// (larkapi.MaxRequestsPerSecond).
	MaxRequestsPerSecond = larkapi.MaxRequestsPerSecond
)

// ReconcileVersion names this reconciliation algorithm in every checkpoint it
// writes (CheckpointMeta.ReconcileVersion, CollectionCheckpoint.ReconcileVersion).
const ReconcileVersion = "reconcile-v1"

// Store is what the reconciler reads and writes in Postgres; *store.Store
// satisfies it.
type Store interface {
	// GetCheckpoint and AdvanceCheckpoint keep a chat's collection checkpoint.
	GetCheckpoint(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID) (store.Checkpoint, error)
	AdvanceCheckpoint(ctx context.Context, ws ids.WorkspaceID, chat ids.ChatID, pos store.CheckpointPosition, meta store.CheckpointMeta) (store.Checkpoint, bool, error)
	// ListBindings lists the bindings of firing workspaces of the lookback.
	ListBindings(ctx context.Context, f store.BindingFilter) ([]store.WorkspaceBinding, error)
	// GetWorkspace and ChatsOfWorkspace serve a manual Refresh.
	GetWorkspace(ctx context.Context, ws ids.WorkspaceID) (store.Workspace, error)
	ChatsOfWorkspace(ctx context.Context, ws ids.WorkspaceID) ([]ids.ChatID, error)
	// EvidenceByKeys tells which versions are already stored, so that a re-read
	// produces only what changed.
	EvidenceByKeys(ctx context.Context, ws ids.WorkspaceID, kind store.EvidenceKind, sourceKeys []string) ([]store.Evidence, error)
	// EvidenceInRange finds the threads a chat's stored evidence names.
	EvidenceInRange(ctx context.Context, q store.RangeQuery) (store.EvidencePage, error)
	// ChatsWithEvidence finds the chats a coverage pass reads first: those with
	// evidence in the window that just ended (schedule.go).
	ChatsWithEvidence(ctx context.Context, chats []store.ChatRef, from, to time.Time) ([]store.ChatRef, error)
	// WorkspacesHoldingMessage finds every workspace a deletion found in history
	// must reach, eligible or not (issue #29).
	WorkspacesHoldingMessage(ctx context.Context, chat ids.ChatID, msg ids.MessageID) ([]ids.WorkspaceID, error)
}

// ChatGuard tells whether a chat may be read (design §6: group and topic-group
// chats only): nil for a group chat, an error wrapping chats.ErrRefused for a single
// (p2p) or unsupported chat, another error when Lark could not say. History items
// carry no chat type, so this is the reconciler's only way to know. *chats.Guard
// satisfies it (cached per chat).
type ChatGuard interface {
	Check(ctx context.Context, chat ids.ChatID, path string) error
}

// Progress is reported after every page batch a chat run committed.
type Progress struct {
	Workspace ids.WorkspaceID
	Chat      ids.ChatID
	Kind      Kind
	// Pages is the history pages read so far (chat and thread containers).
	Pages int
	// Produced is the evidence records acknowledged so far.
	Produced int
	// CoveredUntil is the checkpoint's coverage after the batch.
	CoveredUntil time.Time
}

// Options configure a Reconciler. Zero durations, sizes and rates take the
// Default* values; see doc.go for what each bounds.
type Options struct {
	// Store, Eligibility, Chats, History, Normalizer, Producer, EvidenceCodec and
	// CheckpointCodec are required.
	Store       Store
	Eligibility evidence.Eligibility
	// Chats is asked about every chat before its run reads a page; a refused chat
	// is not read at all.
	Chats      ChatGuard
	History    History
	Normalizer *normalize.Normalizer
	Producer   evidence.Producer
	// EvidenceCodec and CheckpointCodec encode record values.
	EvidenceCodec   *schemas.Codec[schemas.EvidenceRecord]
	CheckpointCodec *schemas.Codec[schemas.CollectionCheckpoint]
	// EvidenceTopic and CheckpointTopic default to schemas.DefaultEvidenceTopic and
	// schemas.DefaultCheckpointTopic.
	EvidenceTopic   string
	CheckpointTopic string
	// Names fills ActorDisplayName from a cache; optional.
	Names evidence.Names

	IngestionLookback       time.Duration
	ReconcileInterval       time.Duration
	ReconcileOverlap        time.Duration
	EvidenceRefreshInterval time.Duration
	EvidenceRefreshLookback time.Duration
	// Retention, when positive, is the evidence retention: no range starts before
	// now − Retention (design §15). Zero: no bound beyond the lookback.
	Retention time.Duration
	// Settle keeps range ends behind now (default DefaultSettle; negative: none).
	Settle time.Duration
	// Window is the synthesis window length (synthesisWindow). When set, Run also
	// starts a coverage pass CoverageDelay after every window end, for the chats with
	// evidence in the window that just ended, ahead of the interval pass
	// (schedule.go). Zero: passes follow ReconcileInterval only.
	Window time.Duration
	// CoverageDelay is how long after a window's end its coverage pass starts: at
	// least Settle (a run covers up to now − Settle), below Window. Default
	// Settle + DefaultCoverageMargin.
	CoverageDelay time.Duration

	// Limiter is the app's client-side rate limit. Nil: one is built from
	// RequestsPerSecond and Burst. Share one Limiter among every user of the
	// app's Open API quota in the process.
	Limiter           *Limiter
	RequestsPerSecond float64
	Burst             int

	MaxConcurrentChats       int
	MaxPagesPerRun           int
	MaxPagesPerManualRefresh int
	PageSize                 int
	// MaxRetries is the retries per history call: nil means DefaultMaxRetries, 0
	// none; at most 100.
	MaxRetries        *int
	MinBackoff        time.Duration
	MaxBackoff        time.Duration
	RequestTimeout    time.Duration
	MaxThreadsPerChat int
	// ThreadActiveWindow bounds which known threads an incremental run re-reads.
	ThreadActiveWindow time.Duration
	DrainTimeout       time.Duration

	// Clock is the time source of ranges, checkpoints and the limiter (default
	// time.Now). Sleep waits between retries and for the limiter (default: a timer
	// that returns early with ctx's error). Jitter returns a float in [0, 1)
	// (default math/rand/v2). Tests inject all three.
	Clock  func() time.Time
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64

	// OnProgress, when set, is called after every committed page batch, from the
	// chat run's goroutine. It must not block long.
	OnProgress func(Progress)
	// Logger receives progress and failures (ids, counts and hashes only). Nil
	// discards.
	Logger *slog.Logger
	// Registry receives the larkline_reconcile_* and larkline_lark_api_* metrics.
	// Nil: not registered.
	Registry *prometheus.Registry
}

// withDefaults validates o and fills its defaults: the dependencies, then the
// values ([Options.Check]'s rules), then the runtime defaults (clock, limiter).
func (o Options) withDefaults() (Options, error) {
	if err := o.checkDeps(); err != nil {
		return Options{}, err
	}
	o, err := o.values()
	if err != nil {
		return Options{}, err
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = backoff.Sleep
	}
	if o.Jitter == nil {
		o.Jitter = defaultJitter
	}
	if o.Limiter == nil {
		l, err := NewLimiter(LimiterOptions{RequestsPerSecond: o.RequestsPerSecond, Burst: o.Burst, Clock: o.Clock, Sleep: o.Sleep})
		if err != nil {
			return Options{}, err
		}
		o.Limiter = l
	}
	return o, nil
}

// Check reports every value of o that breaks the reconciler's rules (after the
// defaults), as an *options.Error naming the fields, or nil. It ignores the
// dependencies (Store, History, codecs...), which New checks too. The
// configuration layer calls it to report a wrong key before anything starts.
func (o Options) Check() error {
	_, err := o.values()
	return err
}

func (o Options) checkDeps() error {
	missing := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.Store == nil:
		return missing("Store is required")
	case o.Eligibility == nil:
		return missing("Eligibility is required")
	case o.Chats == nil:
		return missing("Chats is required (the chat type check)")
	case o.History == nil:
		return missing("History is required")
	case o.Normalizer == nil:
		return missing("Normalizer is required")
	case o.Producer == nil:
		return missing("Producer is required")
	case o.EvidenceCodec == nil:
		return missing("EvidenceCodec is required")
	case o.CheckpointCodec == nil:
		return missing("CheckpointCodec is required")
	}
	return nil
}

// values fills the defaults of o's values and checks them, reporting every
// problem at once: the durations, how they relate, the counts, the rate.
func (o Options) values() (Options, error) {
	p := new(options.Problems)
	o.EvidenceTopic = cmp.Or(o.EvidenceTopic, schemas.DefaultEvidenceTopic)
	o.CheckpointTopic = cmp.Or(o.CheckpointTopic, schemas.DefaultCheckpointTopic)
	if o.EvidenceTopic == o.CheckpointTopic {
		p.Add("CheckpointTopic", o.CheckpointTopic, "must differ from EvidenceTopic")
	}
	o.durations(p)
	o.timeRelations(p)
	o.counts(p)
	o.rate(p)
	if err := p.Err(ErrInvalidOptions); err != nil {
		return Options{}, err
	}
	return o, nil
}

// durations fills the duration defaults and refuses negative ones.
func (o *Options) durations(p *options.Problems) {
	p.Durations(
		options.Duration{Name: "IngestionLookback", V: &o.IngestionLookback, Default: DefaultIngestionLookback},
		options.Duration{Name: "ReconcileInterval", V: &o.ReconcileInterval, Default: DefaultReconcileInterval},
		options.Duration{Name: "EvidenceRefreshInterval", V: &o.EvidenceRefreshInterval, Default: DefaultEvidenceRefreshInterval},
		options.Duration{Name: "EvidenceRefreshLookback", V: &o.EvidenceRefreshLookback, Default: DefaultEvidenceRefreshLookback},
		options.Duration{Name: "MinBackoff", V: &o.MinBackoff, Default: DefaultMinBackoff},
		options.Duration{Name: "MaxBackoff", V: &o.MaxBackoff, Default: DefaultMaxBackoff},
		options.Duration{Name: "RequestTimeout", V: &o.RequestTimeout, Default: DefaultRequestTimeout},
		options.Duration{Name: "ThreadActiveWindow", V: &o.ThreadActiveWindow, Default: DefaultThreadActiveWindow},
		options.Duration{Name: "DrainTimeout", V: &o.DrainTimeout, Default: DefaultDrainTimeout},
	)
	switch {
	case o.ReconcileOverlap == 0:
		o.ReconcileOverlap = DefaultReconcileOverlap
	case o.ReconcileOverlap < 0:
		p.Add("ReconcileOverlap", o.ReconcileOverlap, "must not be negative")
	}
	switch {
	case o.Settle == 0:
		o.Settle = DefaultSettle
	case o.Settle < 0:
		o.Settle = 0
	}
	if o.Retention < 0 {
		p.Add("Retention", o.Retention, "must not be negative")
	}
	if o.Window < 0 {
		p.Add("Window", o.Window, "must not be negative")
	}
	if o.CoverageDelay < 0 {
		p.Add("CoverageDelay", o.CoverageDelay, "must not be negative")
	}
}

// timeRelations checks how the durations (defaults filled) relate, and fills the
// coverage delay, which follows the settle delay.
func (o *Options) timeRelations(p *options.Problems) {
	if o.EvidenceRefreshLookback > o.IngestionLookback {
		p.Add("EvidenceRefreshLookback", o.EvidenceRefreshLookback, "must not exceed IngestionLookback (%s)", o.IngestionLookback)
	}
	if o.ReconcileOverlap > o.EvidenceRefreshLookback {
		p.Add("EvidenceRefreshLookback", o.EvidenceRefreshLookback, "must be at least ReconcileOverlap (%s): the refresh pass is the larger overlap (design §14)", o.ReconcileOverlap)
	}
	if o.ThreadActiveWindow < o.ReconcileOverlap {
		p.Add("ThreadActiveWindow", o.ThreadActiveWindow, "must be at least ReconcileOverlap (%s)", o.ReconcileOverlap)
	}
	if o.MinBackoff > o.MaxBackoff {
		p.Add("MaxBackoff", o.MaxBackoff, "must be at least MinBackoff (%s)", o.MinBackoff)
	}
	if o.Settle >= o.ReconcileInterval {
		p.Add("ReconcileInterval", o.ReconcileInterval, "must be longer than the settle delay (%s): every range ends that far behind now, so a shorter period could never make progress", o.Settle)
	}
	if o.Window <= 0 {
		return
	}
	switch {
	case o.Window < time.Minute:
		p.Add("Window", o.Window, "must be at least 1m")
	case time.Hour%o.Window != 0:
		p.Add("Window", o.Window, "must divide an hour evenly (such as 5m, 10m, 15m, 20m or 30m) so windows align to UTC hours")
	}
	o.CoverageDelay = cmp.Or(o.CoverageDelay, o.Settle+DefaultCoverageMargin)
	switch {
	case o.CoverageDelay < o.Settle:
		p.Add("CoverageDelay", o.CoverageDelay, "must be at least the settle delay (%s): its runs would not reach the window's end", o.Settle)
	case o.CoverageDelay >= o.Window:
		p.Add("CoverageDelay", o.CoverageDelay, "must be shorter than Window (%s)", o.Window)
	}
}

// counts fills and checks the page, chat, thread and retry bounds.
func (o *Options) counts(p *options.Problems) {
	ints := []struct {
		name     string
		v        *int
		def, max int
		why      string
	}{
		{"MaxConcurrentChats", &o.MaxConcurrentChats, DefaultMaxConcurrentChats, 1024, ""},
		{"MaxPagesPerRun", &o.MaxPagesPerRun, DefaultMaxPagesPerRun, 1_000_000, ""},
		{"MaxPagesPerManualRefresh", &o.MaxPagesPerManualRefresh, DefaultMaxPagesPerManualRefresh, 1_000_000, ""},
		{"PageSize", &o.PageSize, DefaultPageSize, MaxPageSize, fmt.Sprintf(": Lark's message list accepts page_size 1-%d", MaxPageSize)},
		{"MaxThreadsPerChat", &o.MaxThreadsPerChat, DefaultMaxThreadsPerChat, 100_000, ""},
	}
	for _, n := range ints {
		switch {
		case *n.v == 0:
			*n.v = n.def
		case *n.v < 0 || *n.v > n.max:
			p.Add(n.name, *n.v, "must be between 1 and %d%s", n.max, n.why)
		}
	}
	if o.MaxRetries == nil {
		o.MaxRetries = new(DefaultMaxRetries)
	}
	if *o.MaxRetries < 0 || *o.MaxRetries > 100 {
		p.Add("MaxRetries", *o.MaxRetries, "must be between 0 and 100 (0: no retries)")
	}
	if o.MaxThreadsPerChat >= o.MaxPagesPerRun {
		p.Add("MaxThreadsPerChat", o.MaxThreadsPerChat, "must be below MaxPagesPerRun (%d): known threads are re-read by every run", o.MaxPagesPerRun)
	}
	if o.MaxPagesPerManualRefresh < o.MaxPagesPerRun {
		p.Add("MaxPagesPerManualRefresh", o.MaxPagesPerManualRefresh, "must be at least MaxPagesPerRun (%d)", o.MaxPagesPerRun)
	}
}

// rate fills and checks the limiter's rate and burst, unless a Limiter is given.
func (o *Options) rate(p *options.Problems) {
	if o.Limiter != nil {
		return
	}
	o.RequestsPerSecond = cmp.Or(o.RequestsPerSecond, DefaultRequestsPerSecond)
	o.Burst = cmp.Or(o.Burst, DefaultBurst)
	LimiterOptions{RequestsPerSecond: o.RequestsPerSecond, Burst: o.Burst}.problems(p)
}

// The production implementations of the seams.
var (
	_ Store                = (*store.Store)(nil)
	_ evidence.Eligibility = (*bindings.Resolver)(nil)
	_ ChatGuard            = (*chats.Guard)(nil)
	_ History              = (*larkapi.Client)(nil)
	_ evidence.Producer    = (*kgo.Client)(nil)
	_ evidence.Names       = (*ingest.Contacts)(nil)
)
