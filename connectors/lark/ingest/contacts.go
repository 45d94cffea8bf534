package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/backoff"
	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/schemas"
)

// Defaults of ContactsOptions.
const (
	DefaultContactsSize        = 50_000
	DefaultContactsTTL         = 24 * time.Hour
	DefaultContactsNegativeTTL = time.Hour
	DefaultContactsQueue       = 1_000
	DefaultContactsBatchWait   = 200 * time.Millisecond
	DefaultContactsRate        = 5.0 // requests per second
	DefaultContactsTimeout     = 5 * time.Second
	DefaultContactsMaxBackoff  = time.Minute
)

// Directory resolves display names in batches; *larkapi.Client satisfies it.
type Directory interface {
	// Names returns the names of the users among openIDs (at most
	// larkapi.MaxDirectoryBatch) the directory knows; unknown ids are absent.
	Names(ctx context.Context, openIDs []string) (map[string]string, error)
}

// ContactsOptions configure a Contacts cache.
type ContactsOptions struct {
	// Directory answers the batch lookups. Required.
	Directory Directory
	// Size bounds the cached open_ids (default DefaultContactsSize).
	Size int
	// TTL is how long a name is fresh; a stale name is still served while it is
	// looked up again (default DefaultContactsTTL).
	TTL time.Duration
	// NegativeTTL is how long an id Lark did not return is not asked again
	// (default DefaultContactsNegativeTTL).
	NegativeTTL time.Duration
	// QueueSize bounds the ids waiting for a lookup; beyond it new ids are dropped
	// and counted (they are queued again the next time they are seen).
	QueueSize int
	// BatchSize is the ids per request, at most larkapi.MaxDirectoryBatch (the default).
	BatchSize int
	// BatchWait is how long a started batch waits for more ids.
	BatchWait time.Duration
	// RequestsPerSecond bounds the lookup rate (default DefaultContactsRate).
	RequestsPerSecond float64
	// Timeout bounds one lookup request (default DefaultContactsTimeout).
	Timeout time.Duration
	// MaxBackoff caps the wait after failed lookups (default DefaultContactsMaxBackoff).
	MaxBackoff time.Duration
	// Clock is the time source of TTLs (default time.Now).
	Clock func() time.Time
	// Logger receives lookup failures (counts and codes only). Nil discards.
	Logger *slog.Logger
	// Registry receives the larkline_lark_contacts_* metrics. Nil: not registered.
	Registry *prometheus.Registry
}

// Contacts is a bounded cache of sender display names, filled in the background by
// batch lookups (design §7.1: the callback never calls the contact API). Name and
// Observe never block on I/O; Run performs the lookups, rate-limited. It is safe for
// concurrent use.
type Contacts struct {
	dir        Directory
	ttl        time.Duration
	negTTL     time.Duration
	batch      int
	batchWait  time.Duration
	interval   time.Duration
	timeout    time.Duration
	maxBackoff time.Duration
	now        func() time.Time
	log        *slog.Logger
	m          *contactsMetrics

	queue chan string

	life    *lifecycle.State
	mu      sync.Mutex
	cache   *lru[string, contact]
	pending map[string]struct{} // queued or being looked up
}

type contact struct {
	name    string // "" for an id the directory did not return
	expires time.Time
}

type contactsMetrics struct {
	lookups  *prometheus.CounterVec
	dropped  prometheus.Counter
	requests *prometheus.CounterVec
	entries  prometheus.Gauge
}

// NewContacts validates opts and returns the cache. Call Run to fill it.
func NewContacts(opts ContactsOptions) (*Contacts, error) {
	if opts.Directory == nil {
		return nil, fmt.Errorf("%w: Directory is required", ErrInvalidOptions)
	}
	ints := []struct {
		name string
		v    *int
		def  int
		max  int
	}{
		{"Size", &opts.Size, DefaultContactsSize, 10_000_000},
		{"QueueSize", &opts.QueueSize, DefaultContactsQueue, 1_000_000},
		{"BatchSize", &opts.BatchSize, larkapi.MaxDirectoryBatch, larkapi.MaxDirectoryBatch},
	}
	for _, i := range ints {
		switch {
		case *i.v == 0:
			*i.v = i.def
		case *i.v < 0 || *i.v > i.max:
			return nil, fmt.Errorf("%w: %s %d outside [1, %d]", ErrInvalidOptions, i.name, *i.v, i.max)
		}
	}
	if err := options.Durations(
		options.Duration{Name: "TTL", V: &opts.TTL, Default: DefaultContactsTTL},
		options.Duration{Name: "NegativeTTL", V: &opts.NegativeTTL, Default: DefaultContactsNegativeTTL},
		options.Duration{Name: "BatchWait", V: &opts.BatchWait, Default: DefaultContactsBatchWait},
		options.Duration{Name: "Timeout", V: &opts.Timeout, Default: DefaultContactsTimeout},
		options.Duration{Name: "MaxBackoff", V: &opts.MaxBackoff, Default: DefaultContactsMaxBackoff},
	); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	switch {
	case opts.RequestsPerSecond == 0:
		opts.RequestsPerSecond = DefaultContactsRate
	case opts.RequestsPerSecond < 0.001 || opts.RequestsPerSecond > 1000:
		return nil, fmt.Errorf("%w: RequestsPerSecond %g outside [0.001, 1000]", ErrInvalidOptions, opts.RequestsPerSecond)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &contactsMetrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_contacts_lookups_total",
			Help: "Sender name lookups in the contacts cache by result: hit, stale (served, refreshed in the background), unknown (Lark did not return the id), miss (queued).",
		}, []string{"result"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "larkline_lark_contacts_queue_dropped_total",
			Help: "Open ids not queued for a name lookup because the queue was full.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "larkline_lark_contacts_requests_total",
			Help: "Contact batch requests to Lark by outcome (ok, retryable_error, error).",
		}, []string{"outcome"}),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "larkline_lark_contacts_entries",
			Help: "Open ids in the contacts cache.",
		}),
	}
	if err := register(opts.Registry, m.lookups, m.dropped, m.requests, m.entries); err != nil {
		return nil, err
	}
	return &Contacts{
		life: lifecycle.New("lark contacts", lifecycle.OneAtATime, ErrClosed),
		dir:  opts.Directory, ttl: opts.TTL, negTTL: opts.NegativeTTL, batch: opts.BatchSize,
		batchWait: opts.BatchWait, interval: time.Duration(float64(time.Second) / opts.RequestsPerSecond),
		timeout: opts.Timeout, maxBackoff: opts.MaxBackoff, now: opts.Clock,
		log: log.With("component", "lark.contacts"), m: m,
		queue:   make(chan string, opts.QueueSize),
		cache:   newLRU[string, contact](opts.Size),
		pending: make(map[string]struct{}),
	}, nil
}

// Name returns the cached display name of openID. An unknown id is queued for a
// lookup and a stale one is served and queued again; Name never blocks.
func (c *Contacts) Name(openID string) (string, bool) {
	if !validOpenID(openID) {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache.get(openID)
	now := c.now()
	switch {
	case !ok:
		c.m.lookups.WithLabelValues("miss").Inc()
		c.enqueueLocked(openID)
		return "", false
	case now.After(e.expires):
		c.m.lookups.WithLabelValues("stale").Inc()
		c.enqueueLocked(openID)
	case e.name == "":
		c.m.lookups.WithLabelValues("unknown").Inc()
	default:
		c.m.lookups.WithLabelValues("hit").Inc()
	}
	return e.name, e.name != ""
}

// Observe records a name Lark sent along with a message (an @-mention) for an id
// the cache does not hold fresh; it never replaces a fresh directory answer.
func (c *Contacts) Observe(openID, name string) {
	name = cleanName(name)
	if !validOpenID(openID) || name == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache.get(openID); ok && e.name != "" && !c.now().After(e.expires) {
		return
	}
	c.cache.put(openID, contact{name: name, expires: c.now().Add(c.ttl)})
	c.m.entries.Set(float64(c.cache.len()))
}

// enqueueLocked queues openID once; c.mu must be held.
func (c *Contacts) enqueueLocked(openID string) {
	if c.life.Closed() {
		return
	}
	if _, ok := c.pending[openID]; ok {
		return
	}
	select {
	case c.queue <- openID:
		c.pending[openID] = struct{}{}
	default:
		c.m.dropped.Inc()
	}
}

// Run performs the queued lookups in batches, at most RequestsPerSecond, until ctx is
// done or Close is called; then it returns nil. A failed batch is not retried as such: its ids leave the
// queue and are queued again when next seen, after a backoff (Lark's rate-limit reset
// when it gives one).
func (c *Contacts) Run(ctx context.Context) error {
	ctx, end, err := c.life.Begin(ctx)
	if err != nil {
		return err
	}
	defer end()

	var next time.Time // earliest next request (rate limit and backoff)
	delay := c.interval
	for {
		ids, ok := c.collect(ctx)
		if !ok {
			return nil
		}
		if wait := time.Until(next); wait > 0 && backoff.Sleep(ctx, wait) != nil {
			return nil
		}
		next = time.Now().Add(c.interval)
		err := c.lookup(ctx, ids)
		if err == nil {
			delay = c.interval
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := delay
		if ae := (*larkapi.APIError)(nil); errors.As(err, &ae) && ae.RetryAfter > wait {
			wait = ae.RetryAfter
		}
		wait = min(wait, c.maxBackoff)
		next = time.Now().Add(wait)
		delay = min(2*delay, c.maxBackoff)
		c.log.Warn("contact lookup failed", "ids", len(ids), "retryable", larkapi.IsRetryable(err), "retry_after", wait, "err", err)
	}
}

// collect waits for the first queued id, then gathers more for up to BatchWait.
func (c *Contacts) collect(ctx context.Context) ([]string, bool) {
	var ids []string
	select {
	case <-ctx.Done():
		return nil, false
	case id := <-c.queue:
		ids = append(ids, id)
	}
	timer := time.NewTimer(c.batchWait)
	defer timer.Stop()
	for len(ids) < c.batch {
		select {
		case <-ctx.Done():
			return nil, false
		case id := <-c.queue:
			ids = append(ids, id)
		case <-timer.C:
			return ids, true
		}
	}
	return ids, true
}

// lookup asks the directory for ids and caches the answer (names, and the absence of
// the others for NegativeTTL).
func (c *Contacts) lookup(ctx context.Context, ids []string) error {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	names, err := c.dir.Names(rctx, ids)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.pending, id)
	}
	if err != nil {
		if larkapi.IsRetryable(err) {
			c.m.requests.WithLabelValues("retryable_error").Inc()
		} else {
			c.m.requests.WithLabelValues("error").Inc()
		}
		return err
	}
	c.m.requests.WithLabelValues("ok").Inc()
	now := c.now()
	for _, id := range ids {
		if name := cleanName(names[id]); name != "" {
			c.cache.put(id, contact{name: name, expires: now.Add(c.ttl)})
			continue
		}
		if e, ok := c.cache.get(id); ok && e.name != "" {
			// Lark no longer shows the user (left, out of range): keep serving the
			// old name until the negative TTL passes.
			c.cache.put(id, contact{name: e.name, expires: now.Add(c.negTTL)})
			continue
		}
		c.cache.put(id, contact{expires: now.Add(c.negTTL)})
	}
	c.m.entries.Set(float64(c.cache.len()))
	return nil
}

// Close stops queueing lookups, stops a running Run and waits for it to return. It is
// idempotent.
func (c *Contacts) Close() error {
	c.life.Close()
	return nil
}

// validOpenID accepts what a Lark open_id looks like (ou_…), bounded.
func validOpenID(s string) bool {
	if !strings.HasPrefix(s, "ou_") || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-') {
			return false
		}
	}
	return true
}

// cleanName makes a display name safe for the evidence record: valid UTF-8, no
// control characters, trimmed, at most schemas.MaxDisplayNameBytes.
func cleanName(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	for len(s) > schemas.MaxDisplayNameBytes {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}
