package bindings

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/schemas/ids"
)

// Defaults of Options.
const (
	DefaultLookback     = 72 * time.Hour
	DefaultCacheSize    = 10_000
	DefaultCacheTTL     = 10 * time.Minute
	DefaultFallbackTTL  = 5 * time.Second
	DefaultQueryTimeout = 2 * time.Second
	DefaultReconnectMin = 500 * time.Millisecond
	DefaultReconnectMax = 30 * time.Second

	maxCacheSize = 10_000_000
)

// Source is what the resolver reads: *store.Store satisfies it.
type Source interface {
	// BindingsForChat returns every workspace the chat is bound to, with the
	// workspace's state, ordered by workspace id.
	BindingsForChat(ctx context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error)
	// ListenBindings reports binding changes to h until ctx is done (nil) or the
	// session fails (the error).
	ListenBindings(ctx context.Context, h store.BindingEvents) error
}

// Options configure a Resolver. Zero durations and sizes take the Default* values.
type Options struct {
	// Source is the binding store. Required.
	Source Source
	// WorkspaceTypes is the allow-list of workspace types ingestion is enabled for
	// (design §6). Required, at least one.
	WorkspaceTypes []string
	// Lookback: a workspace created longer ago than this is no longer eligible.
	Lookback time.Duration
	// CacheSize bounds the number of chats cached.
	CacheSize int
	// CacheTTL is how long an entry lives while the LISTEN session is up.
	CacheTTL time.Duration
	// FallbackTTL is how long an entry lives while it is not; at most CacheTTL.
	FallbackTTL time.Duration
	// QueryTimeout bounds one binding query.
	QueryTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the backoff between LISTEN sessions.
	ReconnectMin, ReconnectMax time.Duration
	// Clock is the time source of TTLs and of eligibility. Default time.Now.
	Clock func() time.Time
	// Logger receives LISTEN failures (ids only). Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_lark_binding_* metrics. Nil: not registered.
	Registry *prometheus.Registry
}

// Resolver maps a chat to its eligible bound workspaces through a bounded cache kept
// coherent by LISTEN/NOTIFY. It is safe for concurrent use.
type Resolver struct {
	src          Source
	pol          policy
	size         int
	ttl          time.Duration
	fallbackTTL  time.Duration
	queryTimeout time.Duration
	reconnectMin time.Duration
	reconnectMax time.Duration
	now          func() time.Time
	log          *slog.Logger
	m            *metrics

	mu        sync.Mutex
	entries   map[ids.ChatID]*entry
	lru       *list.List // of *entry, most recently used at the front
	listening bool
	life      *lifecycle.State
}

// entry is one cached chat. While loading is non-nil a query is in flight; bindings
// and err are set before loading is closed and never change afterwards.
type entry struct {
	chat      ids.ChatID
	bindings  []store.WorkspaceBinding
	err       error
	fetchedAt time.Time
	loading   chan struct{}
	elem      *list.Element
}

// New validates opts and returns a Resolver. Call Run to follow binding changes;
// without it, entries live only FallbackTTL.
func New(opts Options) (*Resolver, error) {
	if opts.Source == nil {
		return nil, fmt.Errorf("%w: Source is required", ErrInvalidOptions)
	}
	if len(opts.WorkspaceTypes) == 0 {
		return nil, fmt.Errorf("%w: WorkspaceTypes needs at least one workspace type", ErrInvalidOptions)
	}
	types := make(map[string]bool, len(opts.WorkspaceTypes))
	for _, t := range opts.WorkspaceTypes {
		if t == "" || len(t) > store.MaxWorkspaceTypeLen {
			return nil, fmt.Errorf("%w: workspace type %q must be 1..%d bytes", ErrInvalidOptions, t, store.MaxWorkspaceTypeLen)
		}
		types[t] = true
	}
	if err := options.Durations(
		options.Duration{Name: "Lookback", V: &opts.Lookback, Default: DefaultLookback},
		options.Duration{Name: "CacheTTL", V: &opts.CacheTTL, Default: DefaultCacheTTL},
		options.Duration{Name: "FallbackTTL", V: &opts.FallbackTTL, Default: DefaultFallbackTTL},
		options.Duration{Name: "QueryTimeout", V: &opts.QueryTimeout, Default: DefaultQueryTimeout},
		options.Duration{Name: "ReconnectMin", V: &opts.ReconnectMin, Default: DefaultReconnectMin},
		options.Duration{Name: "ReconnectMax", V: &opts.ReconnectMax, Default: DefaultReconnectMax},
	); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	if opts.FallbackTTL > opts.CacheTTL {
		return nil, fmt.Errorf("%w: FallbackTTL %s exceeds CacheTTL %s", ErrInvalidOptions, opts.FallbackTTL, opts.CacheTTL)
	}
	if opts.ReconnectMin > opts.ReconnectMax {
		return nil, fmt.Errorf("%w: ReconnectMin %s exceeds ReconnectMax %s", ErrInvalidOptions, opts.ReconnectMin, opts.ReconnectMax)
	}
	switch {
	case opts.CacheSize == 0:
		opts.CacheSize = DefaultCacheSize
	case opts.CacheSize < 0 || opts.CacheSize > maxCacheSize:
		return nil, fmt.Errorf("%w: CacheSize %d outside [1, %d]", ErrInvalidOptions, opts.CacheSize, maxCacheSize)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	return &Resolver{
		life:         lifecycle.New("binding resolver", lifecycle.OneAtATime, ErrClosed),
		src:          opts.Source,
		pol:          policy{lookback: opts.Lookback, types: types},
		size:         opts.CacheSize,
		ttl:          opts.CacheTTL,
		fallbackTTL:  opts.FallbackTTL,
		queryTimeout: opts.QueryTimeout,
		reconnectMin: opts.ReconnectMin,
		reconnectMax: opts.ReconnectMax,
		now:          opts.Clock,
		log:          log.With("component", "lark.bindings"),
		m:            m,
		entries:      make(map[ids.ChatID]*entry),
		lru:          list.New(),
	}, nil
}

// Resolve returns the workspaces a message of chat created at occurredAt must be
// stored in (design §6), and the bound workspaces it must not be stored in with the
// reason. An error means the bindings could not be read (IsRetryable tells whether
// a later attempt may pass); the message must then not be acknowledged.
func (r *Resolver) Resolve(ctx context.Context, chat ids.ChatID, occurredAt time.Time) (Resolution, error) {
	if _, err := ids.ParseChatID(string(chat)); err != nil {
		return Resolution{}, fmt.Errorf("resolve bindings: %w", err)
	}
	bs, err := r.bindings(ctx, chat)
	if err != nil {
		return Resolution{}, err
	}
	return r.pol.resolve(chat, bs, r.now(), occurredAt), nil
}

// bindings returns the chat's bindings from the cache or the source.
func (r *Resolver) bindings(ctx context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error) {
	r.mu.Lock()
	if r.life.Closed() {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	now := r.now()
	e := r.entries[chat]
	switch {
	case e != nil && e.loading != nil:
		wait := e.loading
		r.mu.Unlock()
		r.m.lookups.WithLabelValues(lookupCoalesced).Inc()
		return r.await(ctx, e, wait)
	case e != nil && now.Sub(e.fetchedAt) < r.currentTTL():
		r.lru.MoveToFront(e.elem)
		bs := e.bindings
		r.mu.Unlock()
		r.m.lookups.WithLabelValues(lookupHit).Inc()
		return bs, nil
	case e != nil:
		r.removeLocked(e)
		r.m.invalidations.WithLabelValues(invalidateExpired).Inc()
	}
	e = &entry{chat: chat, fetchedAt: now, loading: make(chan struct{})}
	e.elem = r.lru.PushFront(e)
	r.entries[chat] = e
	for r.lru.Len() > r.size {
		r.removeLocked(r.lru.Back().Value.(*entry))
		r.m.invalidations.WithLabelValues(invalidateEvicted).Inc()
	}
	r.m.entries.Set(float64(len(r.entries)))
	wait := e.loading
	r.mu.Unlock()
	r.m.lookups.WithLabelValues(lookupMiss).Inc()

	// The query is detached from the caller's context: callers coalesced onto it must
	// not fail because the first caller gave up. It is bounded by QueryTimeout.
	go r.load(context.WithoutCancel(ctx), e)
	return r.await(ctx, e, wait)
}

func (r *Resolver) await(ctx context.Context, e *entry, wait <-chan struct{}) ([]store.WorkspaceBinding, error) {
	select {
	case <-wait:
		return e.bindings, e.err
	case <-ctx.Done():
		return nil, fmt.Errorf("resolve bindings of chat %s: %w", e.chat, context.Cause(ctx))
	}
}

// load queries the chat's bindings and publishes them to the entry's waiters. The
// entry is cached only if it was not invalidated, evicted or reset meanwhile.
func (r *Resolver) load(ctx context.Context, e *entry) {
	ctx, cancel := context.WithTimeout(ctx, r.queryTimeout)
	defer cancel()
	bs, err := r.src.BindingsForChat(ctx, e.chat)
	if err != nil {
		r.m.queries.WithLabelValues("error").Inc()
		err = fmt.Errorf("resolve bindings of chat %s: %w", e.chat, err)
	} else {
		r.m.queries.WithLabelValues("ok").Inc()
		bs = slices.Clip(bs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e.bindings, e.err = bs, err
	close(e.loading)
	if r.entries[e.chat] != e {
		return // invalidated while loading: answer, do not cache
	}
	if err != nil {
		r.removeLocked(e)
		r.m.entries.Set(float64(len(r.entries)))
		return
	}
	e.loading = nil
}

// currentTTL is the entry lifetime given the LISTEN state. r.mu must be held.
func (r *Resolver) currentTTL() time.Duration {
	if r.listening {
		return r.ttl
	}
	return r.fallbackTTL
}

// removeLocked drops e from the cache. r.mu must be held.
func (r *Resolver) removeLocked(e *entry) {
	if r.entries[e.chat] == e {
		delete(r.entries, e.chat)
	}
	if e.elem != nil {
		r.lru.Remove(e.elem)
		e.elem = nil
	}
}

// invalidate drops one chat's entry.
func (r *Resolver) invalidate(chat ids.ChatID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[chat]; e != nil {
		r.removeLocked(e)
		r.m.invalidations.WithLabelValues(invalidateChat).Inc()
		r.m.entries.Set(float64(len(r.entries)))
	}
}

// reset drops every entry and records whether the LISTEN session is up.
func (r *Resolver) reset(listening bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.entries); n > 0 {
		r.m.invalidations.WithLabelValues(invalidateReset).Add(float64(n))
	}
	clear(r.entries)
	r.lru.Init()
	r.listening = listening
	r.m.entries.Set(0)
	if listening {
		r.m.listenUp.Set(1)
	} else {
		r.m.listenUp.Set(0)
	}
}

func (r *Resolver) setListening(up bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listening = up
	if up {
		r.m.listenUp.Set(1)
	} else {
		r.m.listenUp.Set(0)
	}
}

// Listening reports whether the LISTEN session is up (entries live CacheTTL) or not
// (they live FallbackTTL).
func (r *Resolver) Listening() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listening
}

// listener adapts the resolver to store.BindingEvents without exporting the
// callbacks on Resolver itself.
type listener struct{ r *Resolver }

func (l listener) BindingsReset()                 { l.r.reset(true) }
func (l listener) BindingChanged(chat ids.ChatID) { l.r.invalidate(chat) }

// Run listens for binding changes until ctx is done or Close is called, then returns
// nil. A failed or dropped session is restarted after a capped exponential backoff
// with jitter; meanwhile cached entries live only FallbackTTL. Run may be called once at a time.
func (r *Resolver) Run(ctx context.Context) error {
	ctx, end, err := r.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()
	defer r.setListening(false)

	delay := r.reconnectMin
	for {
		started := r.now()
		err := r.src.ListenBindings(ctx, listener{r})
		r.setListening(false)
		if ctx.Err() != nil {
			return nil
		}
		r.m.listenDrops.Inc()
		if r.now().Sub(started) >= r.reconnectMax {
			delay = r.reconnectMin // the session was up long enough: start over
		}
		wait := backoff.Jitter(delay)
		r.log.Warn("binding change listener stopped; cache on fallback TTL until it is back",
			"err", err, "retryable", IsRetryable(err), "retry_in", wait)
		if backoff.Sleep(ctx, wait) != nil {
			return nil
		}
		delay = min(2*delay, r.reconnectMax)
	}
}

// Close stops a running Run and waits for it, then drops the cache; later Resolve
// and Run calls return ErrClosed. Close is idempotent.
func (r *Resolver) Close() error {
	r.life.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.entries)
	r.lru.Init()
	r.m.entries.Set(0)
	return nil
}
