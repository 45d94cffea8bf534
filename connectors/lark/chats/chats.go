package chats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/schemas/ids"
)

// Paths that check chats (the path label of larkline_lark_chat_refusals_total).
const (
	PathReconcile = "reconcile"
	PathAdmin     = "admin"
	PathFeed      = "feed"
)

// Refusal reasons (the reason label), the normalizer's reasons for the same thing
// on the event path.
const (
	ReasonP2PChat     = normalize.ReasonP2PChat
	ReasonUnsupported = normalize.ReasonUnsupportedChatType
)

// Defaults of Options.
const (
	DefaultTTL        = 6 * time.Hour
	DefaultMaxEntries = 10_000
	// DefaultTimeout bounds one chat info call.
	DefaultTimeout = 10 * time.Second
)

var (
	// ErrRefused is wrapped by every refusal of a chat that is not a group chat.
	ErrRefused = errors.New("not a group chat")
	// ErrP2PChat: the chat is a single (p2p) chat; larkline never reads or binds one.
	ErrP2PChat = fmt.Errorf("%w: a single (p2p) chat", ErrRefused)
	// ErrUnsupportedChat: Lark reports a chat mode larkline does not know, or none.
	ErrUnsupportedChat = fmt.Errorf("%w: unsupported chat mode", ErrRefused)
	// ErrInvalidOptions is returned (wrapped) by constructors.
	ErrInvalidOptions = errors.New("invalid chats options")
)

// Reason is the refusal reason of err (ReasonP2PChat, ReasonUnsupported), "" when
// err is no refusal.
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrP2PChat):
		return ReasonP2PChat
	case errors.Is(err, ErrUnsupportedChat):
		return ReasonUnsupported
	}
	return ""
}

// Source answers the chat info API, one request per call, without retrying
// (*larkapi.Client in production).
type Source interface {
	GetChat(ctx context.Context, chat ids.ChatID) (larkapi.ChatInfo, error)
}

var _ Source = (*larkapi.Client)(nil)

// Options configure a Guard.
type Options struct {
	// Source is required.
	Source Source
	// TTL is how long an answer is kept (default DefaultTTL; negative is invalid).
	TTL time.Duration
	// MaxEntries bounds the cached chats (default DefaultMaxEntries).
	MaxEntries int
	// Timeout bounds one lookup (default DefaultTimeout).
	Timeout time.Duration
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Logger receives one line per refused lookup (ids and modes only). Nil discards.
	Logger *slog.Logger
	// Registry receives larkline_lark_chat_*; nil: not registered.
	Registry *prometheus.Registry
}

// Guard checks chats against the chat info API, with a cache. It is safe for
// concurrent use; share one per process.
type Guard struct {
	src     Source
	ttl     time.Duration
	max     int
	timeout time.Duration
	clock   func() time.Time
	log     *slog.Logger

	refusals *prometheus.CounterVec
	lookups  *prometheus.CounterVec

	mu    sync.Mutex
	cache map[ids.ChatID]entry
}

type entry struct {
	mode string
	at   time.Time
}

// New validates opts and returns a Guard.
func New(opts Options) (*Guard, error) {
	switch {
	case opts.Source == nil:
		return nil, fmt.Errorf("%w: Source is required", ErrInvalidOptions)
	case opts.TTL < 0:
		return nil, fmt.Errorf("%w: TTL %s is negative", ErrInvalidOptions, opts.TTL)
	case opts.MaxEntries < 0:
		return nil, fmt.Errorf("%w: MaxEntries %d is negative", ErrInvalidOptions, opts.MaxEntries)
	case opts.Timeout < 0:
		return nil, fmt.Errorf("%w: Timeout %s is negative", ErrInvalidOptions, opts.Timeout)
	}
	g := &Guard{src: opts.Source, ttl: opts.TTL, max: opts.MaxEntries, timeout: opts.Timeout, clock: opts.Clock,
		log: opts.Logger, cache: map[ids.ChatID]entry{}}
	g.ttl = cmp.Or(g.ttl, DefaultTTL)
	g.max = cmp.Or(g.max, DefaultMaxEntries)
	g.timeout = cmp.Or(g.timeout, DefaultTimeout)
	if g.clock == nil {
		g.clock = time.Now
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.log = g.log.With("component", "lark.chats")
	g.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_lark_chat_refusals_total",
		Help: "Chats refused because they are not group chats (chat info API), by path (reconcile, admin, feed) and reason (p2p_chat, unsupported_chat_type).",
	}, []string{"path", "reason"})
	g.lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "larkline_lark_chat_lookups_total",
		Help: "Lark chat info API lookups (cache misses), by outcome (ok, failed).",
	}, []string{"outcome"})
	if opts.Registry != nil {
		for _, c := range []prometheus.Collector{g.refusals, g.lookups} {
			if err := opts.Registry.Register(c); err != nil {
				return nil, fmt.Errorf("%w: register metrics: %w", ErrInvalidOptions, err)
			}
		}
	}
	return g, nil
}

// Check tells whether chat may be read or bound: nil for a group or topic group;
// an error wrapping ErrP2PChat or ErrUnsupportedChat (counted under path) for any
// other chat; another error when Lark could not answer (not counted as a refusal,
// and not cached). path is one of the Path* constants.
func (g *Guard) Check(ctx context.Context, chat ids.ChatID, path string) error {
	if _, err := ids.ParseChatID(string(chat)); err != nil {
		return fmt.Errorf("check chat: %w", err)
	}
	mode, err := g.mode(ctx, chat)
	if err != nil {
		return err
	}
	var refusal error
	switch mode {
	case larkapi.ModeGroup, larkapi.ModeTopic:
		return nil
	case larkapi.ModeP2P:
		refusal = fmt.Errorf("chat %s: %w", chat, ErrP2PChat)
	default:
		refusal = fmt.Errorf("chat %s (chat_mode %.20q): %w", chat, mode, ErrUnsupportedChat)
	}
	switch path {
	case PathReconcile, PathAdmin, PathFeed:
	default:
		path = "other"
	}
	g.refusals.WithLabelValues(path, Reason(refusal)).Inc()
	return refusal
}

// mode returns chat's cached or looked-up mode.
func (g *Guard) mode(ctx context.Context, chat ids.ChatID) (string, error) {
	now := g.clock()
	g.mu.Lock()
	e, ok := g.cache[chat]
	g.mu.Unlock()
	if ok && now.Sub(e.at) < g.ttl {
		return e.mode, nil
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	info, err := g.src.GetChat(cctx, chat)
	cancel()
	if err != nil {
		g.lookups.WithLabelValues("failed").Inc()
		return "", fmt.Errorf("look up the type of chat %s: %w", chat, err)
	}
	g.lookups.WithLabelValues("ok").Inc()
	if info.Mode != larkapi.ModeGroup && info.Mode != larkapi.ModeTopic {
		g.log.Warn("chat is not a group chat: larkline neither reads nor binds it", "chat_id", chat, "chat_mode", fmt.Sprintf("%.20s", info.Mode))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.cache) >= g.max {
		g.evictOldest()
	}
	g.cache[chat] = entry{mode: info.Mode, at: now}
	return info.Mode, nil
}

// evictOldest drops the entry looked up longest ago; the caller holds g.mu.
func (g *Guard) evictOldest() {
	var (
		oldest ids.ChatID
		at     time.Time
		found  bool
	)
	for c, e := range g.cache {
		if !found || e.at.Before(at) {
			oldest, at, found = c, e.at, true
		}
	}
	if found {
		delete(g.cache, oldest)
	}
}

// Forget drops chat's cached answer (tests, and a refresh on demand).
func (g *Guard) Forget(chat ids.ChatID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.cache, chat)
}
