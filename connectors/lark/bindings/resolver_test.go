package bindings

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas/ids"
)

var t0 = time.Date(2025, 6, 12, 14, 0, 0, 0, time.UTC)

// fakeSource serves bindings from memory and counts queries. block, when set, holds
// every query until it is closed. listen, when set, runs as ListenBindings.
type fakeSource struct {
	mu      sync.Mutex
	byChat  map[ids.ChatID][]store.WorkspaceBinding
	err     error
	queries atomic.Int64
	block   chan struct{}
	listen  func(ctx context.Context, h store.BindingEvents) error
}

func newFakeSource() *fakeSource {
	return &fakeSource{byChat: map[ids.ChatID][]store.WorkspaceBinding{}}
}

func (f *fakeSource) set(chat ids.ChatID, bs ...store.WorkspaceBinding) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byChat[chat] = bs
}

func (f *fakeSource) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// BindingsForChat reads its answer first and then blocks (when block is set), like a
// query whose snapshot predates a concurrent change.
func (f *fakeSource) BindingsForChat(ctx context.Context, chat ids.ChatID) ([]store.WorkspaceBinding, error) {
	f.queries.Add(1)
	f.mu.Lock()
	block, err := f.block, f.err
	bs := append([]store.WorkspaceBinding(nil), f.byChat[chat]...)
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	return bs, nil
}

func (f *fakeSource) ListenBindings(ctx context.Context, h store.BindingEvents) error {
	f.mu.Lock()
	listen := f.listen
	f.mu.Unlock()
	if listen != nil {
		return listen(ctx, h)
	}
	<-ctx.Done()
	return nil
}

func binding(chat ids.ChatID, ws ids.WorkspaceID, typ string, status store.WorkspaceStatus, created time.Time) store.WorkspaceBinding {
	return store.WorkspaceBinding{Chat: chat, Workspace: store.Workspace{ID: ws, Type: typ, Status: status, CreatedAt: created}, BoundAt: created}
}

func newResolver(t *testing.T, src Source, c *testenv.Clock, mod func(*Options)) *Resolver {
	t.Helper()
	opts := Options{Source: src, WorkspaceTypes: []string{"incident"}, Clock: c.Now}
	if mod != nil {
		mod(&opts)
	}
	r, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func targets(res Resolution) []ids.WorkspaceID {
	var out []ids.WorkspaceID
	for _, tg := range res.Targets {
		out = append(out, tg.Workspace)
	}
	return out
}

func TestEligibility(t *testing.T) {
	const chat = ids.ChatID("oc_chat")
	created := t0.Add(-time.Hour)
	tests := []struct {
		name       string
		b          store.WorkspaceBinding
		now        time.Time
		occurredAt time.Time
		want       string // "" = eligible
	}{
		{"firing incident, message after creation", binding(chat, "ws-1", "incident", store.WorkspaceFiring, created), t0, t0, ""},
		{"message exactly at creation", binding(chat, "ws-1", "incident", store.WorkspaceFiring, created), t0, created, ""},
		{"message a millisecond before creation", binding(chat, "ws-1", "incident", store.WorkspaceFiring, created), t0, created.Add(-time.Millisecond), ReasonBeforeWorkspace},
		{"recovered workspace", binding(chat, "ws-1", "incident", store.WorkspaceRecovered, created), t0, t0, ReasonNotFiring},
		{"archived workspace", binding(chat, "ws-1", "incident", store.WorkspaceArchived, created), t0, t0, ReasonNotFiring},
		{"workspace type not enabled", binding(chat, "ws-1", "drill", store.WorkspaceFiring, created), t0, t0, ReasonTypeDisabled},
		{"created exactly the lookback ago", binding(chat, "ws-1", "incident", store.WorkspaceFiring, t0.Add(-72*time.Hour)), t0, t0, ""},
		{"created just over the lookback ago", binding(chat, "ws-1", "incident", store.WorkspaceFiring, t0.Add(-72*time.Hour-time.Millisecond)), t0, t0, ReasonTooOld},
		{"type is checked before status", binding(chat, "ws-1", "drill", store.WorkspaceRecovered, created), t0, t0, ReasonTypeDisabled},
		{"status is checked before age", binding(chat, "ws-1", "incident", store.WorkspaceRecovered, t0.Add(-100*time.Hour)), t0, t0, ReasonNotFiring},
	}
	p := policy{lookback: DefaultLookback, types: map[string]bool{"incident": true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.exclusion(tt.b.Workspace, tt.now, tt.occurredAt); got != tt.want {
				t.Fatalf("exclusion = %q, want %q", got, tt.want)
			}
			res := p.resolve(chat, []store.WorkspaceBinding{tt.b}, tt.now, tt.occurredAt)
			if got := res.Reason(); got != tt.want {
				t.Fatalf("Resolution.Reason = %q, want %q", got, tt.want)
			}
			if eligible := len(res.Targets) == 1; eligible != (tt.want == "") {
				t.Fatalf("targets = %v, want eligible=%v", res.Targets, tt.want == "")
			}
		})
	}
}

func TestResolveMapsAChatToEveryEligibleWorkspace(t *testing.T) {
	const chat = ids.ChatID("oc_shared")
	src := newFakeSource()
	created := t0.Add(-time.Hour)
	src.set(chat,
		binding(chat, "ws-a", "incident", store.WorkspaceFiring, created),
		binding(chat, "ws-b", "incident", store.WorkspaceRecovered, created),
		binding(chat, "ws-c", "incident", store.WorkspaceFiring, created.Add(30*time.Minute)),
		binding(chat, "ws-d", "major", store.WorkspaceFiring, created),
		binding(chat, "ws-e", "incident", store.WorkspaceFiring, t0.Add(-80*time.Hour)),
	)
	c := testenv.NewClock(t0)
	r := newResolver(t, src, c, func(o *Options) { o.WorkspaceTypes = []string{"incident", "major"} })

	tests := []struct {
		name       string
		occurredAt time.Time
		want       []ids.WorkspaceID
		excluded   map[ids.WorkspaceID]string
	}{
		{"message after every creation", t0.Add(-time.Minute), []ids.WorkspaceID{"ws-a", "ws-c", "ws-d"},
			map[ids.WorkspaceID]string{"ws-b": ReasonNotFiring, "ws-e": ReasonTooOld}},
		{"message before ws-c existed", created.Add(10 * time.Minute), []ids.WorkspaceID{"ws-a", "ws-d"},
			map[ids.WorkspaceID]string{"ws-b": ReasonNotFiring, "ws-c": ReasonBeforeWorkspace, "ws-e": ReasonTooOld}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := r.Resolve(context.Background(), chat, tt.occurredAt)
			if err != nil {
				t.Fatal(err)
			}
			if got := targets(res); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("targets = %v, want %v", got, tt.want)
			}
			if len(res.Excluded) != len(tt.excluded) {
				t.Fatalf("excluded = %v, want %v", res.Excluded, tt.excluded)
			}
			for _, ex := range res.Excluded {
				if tt.excluded[ex.Workspace] != ex.Reason {
					t.Fatalf("excluded %s for %q, want %q", ex.Workspace, ex.Reason, tt.excluded[ex.Workspace])
				}
			}
		})
	}
	if n := src.queries.Load(); n != 1 {
		t.Fatalf("queries = %d, want 1 (second resolve is a cache hit)", n)
	}
}

func TestResolveUnboundChatIsCachedNegatively(t *testing.T) {
	src := newFakeSource()
	c := testenv.NewClock(t0)
	r := newResolver(t, src, c, nil)
	for range 3 {
		res, err := r.Resolve(context.Background(), "oc_nobody", t0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Reason() != ReasonUnboundChat || len(res.Targets) != 0 {
			t.Fatalf("resolution = %+v, want unbound", res)
		}
	}
	if n := src.queries.Load(); n != 1 {
		t.Fatalf("queries = %d, want 1", n)
	}
}

func TestResolveAgesOutWithoutInvalidation(t *testing.T) {
	const chat = ids.ChatID("oc_aging")
	src := newFakeSource()
	src.set(chat, binding(chat, "ws-1", "incident", store.WorkspaceFiring, t0.Add(-71*time.Hour)))
	c := testenv.NewClock(t0)
	// Listening (CacheTTL applies) with a long TTL: only the clock changes.
	listening := make(chan struct{})
	src.listen = func(ctx context.Context, h store.BindingEvents) error {
		h.BindingsReset()
		close(listening)
		<-ctx.Done()
		return nil
	}
	r := newResolver(t, src, c, func(o *Options) { o.CacheTTL = 24 * time.Hour })
	runResolver(t, r)
	<-listening

	res, err := r.Resolve(context.Background(), chat, t0)
	if err != nil || len(res.Targets) != 1 {
		t.Fatalf("before aging: %+v, %v", res, err)
	}
	c.Advance(2 * time.Hour)
	res, err = r.Resolve(context.Background(), chat, c.Now())
	if err != nil || res.Reason() != ReasonTooOld {
		t.Fatalf("after aging: %+v, %v; want %s", res, err, ReasonTooOld)
	}
	if n := src.queries.Load(); n != 1 {
		t.Fatalf("queries = %d, want 1 (eligibility is evaluated on cached rows)", n)
	}
}

func runResolver(t *testing.T, r *Resolver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestCacheTTLDependsOnListening(t *testing.T) {
	const chat = ids.ChatID("oc_ttl")
	src := newFakeSource()
	src.set(chat, binding(chat, "ws-1", "incident", store.WorkspaceFiring, t0.Add(-time.Hour)))
	c := testenv.NewClock(t0)

	events := make(chan func(store.BindingEvents))
	sessions := make(chan error)
	src.listen = func(ctx context.Context, h store.BindingEvents) error {
		h.BindingsReset()
		for {
			select {
			case <-ctx.Done():
				return nil
			case f := <-events:
				f(h)
			case err := <-sessions:
				return err
			}
		}
	}
	r := newResolver(t, src, c, func(o *Options) {
		o.CacheTTL = time.Hour
		o.FallbackTTL = time.Second
		o.ReconnectMin, o.ReconnectMax = time.Millisecond, time.Millisecond
	})
	resolve := func() {
		t.Helper()
		if _, err := r.Resolve(context.Background(), chat, t0); err != nil {
			t.Fatal(err)
		}
	}
	wantQueries := func(n int64) {
		t.Helper()
		if got := src.queries.Load(); got != n {
			t.Fatalf("queries = %d, want %d", got, n)
		}
	}

	// Not listening yet: the fallback TTL applies.
	resolve()
	resolve()
	wantQueries(1)
	c.Advance(2 * time.Second)
	resolve()
	wantQueries(2)

	// Listening: the long TTL applies, and the reset dropped the cache.
	runResolver(t, r)
	waitFor(t, "listening", r.Listening)
	resolve()
	wantQueries(3)
	c.Advance(30 * time.Minute)
	resolve()
	wantQueries(3)

	// A notification for the chat drops its entry at once.
	done := make(chan struct{})
	events <- func(h store.BindingEvents) { h.BindingChanged(chat); close(done) }
	<-done
	resolve()
	wantQueries(4)

	// A notification for another chat does not.
	done = make(chan struct{})
	events <- func(h store.BindingEvents) { h.BindingChanged("oc_other"); close(done) }
	<-done
	resolve()
	wantQueries(4)

	// The session drops: back to the fallback TTL until it is re-established.
	src.mu.Lock()
	src.listen = func(ctx context.Context, h store.BindingEvents) error {
		<-ctx.Done() // a reconnect that never completes (LISTEN not issued)
		return nil
	}
	src.mu.Unlock()
	sessions <- errors.New("connection reset")
	waitFor(t, "listener down", func() bool { return !r.Listening() })
	c.Advance(2 * time.Second)
	resolve()
	wantQueries(5)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, cond)
}

func TestConcurrentMissesShareOneQuery(t *testing.T) {
	const chat = ids.ChatID("oc_burst")
	src := newFakeSource()
	src.set(chat, binding(chat, "ws-1", "incident", store.WorkspaceFiring, t0.Add(-time.Hour)))
	src.block = make(chan struct{})
	reg := prometheus.NewRegistry()
	r := newResolver(t, src, testenv.NewClock(t0), func(o *Options) { o.Registry = reg })

	// One caller gives up early: its cancellation must not fail the others.
	impatient, cancel := context.WithCancel(context.Background())
	impatientErr := make(chan error, 1)
	go func() {
		_, err := r.Resolve(impatient, chat, t0)
		impatientErr <- err
	}()
	waitFor(t, "first caller waiting", func() bool { return src.queries.Load() == 1 })
	cancel()
	if err := <-impatientErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("impatient caller: %v, want context.Canceled", err)
	}

	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := r.Resolve(context.Background(), chat, t0)
			if err != nil || len(res.Targets) != 1 {
				errs <- fmt.Errorf("caller %d: %+v, %v", i, res, err)
			}
		})
	}
	waitFor(t, "all callers waiting", func() bool {
		return testutil.ToFloat64(r.m.lookups.WithLabelValues(lookupCoalesced)) == n
	})
	close(src.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if q := src.queries.Load(); q != 1 {
		t.Fatalf("queries = %d, want 1", q)
	}
}

func TestInvalidationDuringQueryIsNotCached(t *testing.T) {
	const chat = ids.ChatID("oc_race")
	src := newFakeSource()
	src.block = make(chan struct{})
	r := newResolver(t, src, testenv.NewClock(t0), nil)

	done := make(chan Resolution, 1)
	go func() {
		res, _ := r.Resolve(context.Background(), chat, t0)
		done <- res
	}()
	waitFor(t, "query in flight", func() bool { return src.queries.Load() == 1 })
	// The binding is added and notified while the query still sees the old state.
	listener{r}.BindingChanged(chat)
	src.set(chat, binding(chat, "ws-1", "incident", store.WorkspaceFiring, t0.Add(-time.Hour)))
	close(src.block)
	if res := <-done; res.Reason() != ReasonUnboundChat {
		t.Fatalf("in-flight answer = %+v, want the pre-change (unbound) answer", res)
	}
	res, err := r.Resolve(context.Background(), chat, t0)
	if err != nil || len(res.Targets) != 1 {
		t.Fatalf("next resolve = %+v, %v; want the new binding (the raced answer was not cached)", res, err)
	}
	if q := src.queries.Load(); q != 2 {
		t.Fatalf("queries = %d, want 2", q)
	}
}

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	src := newFakeSource()
	reg := prometheus.NewRegistry()
	r := newResolver(t, src, testenv.NewClock(t0), func(o *Options) { o.CacheSize = 2; o.Registry = reg })
	ctx := context.Background()
	for _, chat := range []ids.ChatID{"oc_a", "oc_b", "oc_a", "oc_c"} { // oc_b is evicted by oc_c
		if _, err := r.Resolve(ctx, chat, t0); err != nil {
			t.Fatal(err)
		}
	}
	if q := src.queries.Load(); q != 3 {
		t.Fatalf("queries = %d, want 3", q)
	}
	for _, chat := range []ids.ChatID{"oc_a", "oc_c"} {
		if _, err := r.Resolve(ctx, chat, t0); err != nil {
			t.Fatal(err)
		}
	}
	if q := src.queries.Load(); q != 3 {
		t.Fatalf("queries = %d, want 3 (oc_a and oc_c cached)", q)
	}
	if _, err := r.Resolve(ctx, "oc_b", t0); err != nil {
		t.Fatal(err)
	}
	if q := src.queries.Load(); q != 4 {
		t.Fatalf("queries = %d, want 4 (oc_b was evicted)", q)
	}
	if got := testutil.ToFloat64(r.m.invalidations.WithLabelValues(invalidateEvicted)); got != 2 {
		t.Fatalf("evictions = %v, want 2", got)
	}
	if got := testutil.ToFloat64(r.m.entries); got != 2 {
		t.Fatalf("entries gauge = %v, want 2", got)
	}
}

func TestQueryErrorsAreReturnedAndNotCached(t *testing.T) {
	const chat = ids.ChatID("oc_err")
	src := newFakeSource()
	src.setErr(fmt.Errorf("bindings: %w", context.DeadlineExceeded))
	r := newResolver(t, src, testenv.NewClock(t0), nil)
	_, err := r.Resolve(context.Background(), chat, t0)
	if err == nil || !IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable error", err)
	}
	src.setErr(fmt.Errorf("%w: bad", store.ErrInvalid))
	_, err = r.Resolve(context.Background(), chat, t0)
	if err == nil || IsRetryable(err) {
		t.Fatalf("err = %v, want a non-retryable error", err)
	}
	src.setErr(nil)
	if _, err := r.Resolve(context.Background(), chat, t0); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if q := src.queries.Load(); q != 3 {
		t.Fatalf("queries = %d, want 3 (errors are not cached)", q)
	}
}

func TestResolveRejectsInvalidChat(t *testing.T) {
	src := newFakeSource()
	r := newResolver(t, src, testenv.NewClock(t0), nil)
	for _, chat := range []ids.ChatID{"", "chat", "oc_a/b"} {
		if _, err := r.Resolve(context.Background(), chat, t0); !errors.Is(err, ids.ErrInvalidID) {
			t.Errorf("Resolve(%q) = %v, want ids.ErrInvalidID", chat, err)
		}
	}
	if q := src.queries.Load(); q != 0 {
		t.Fatalf("queries = %d, want 0", q)
	}
}

func TestRunRestartsAFailedListenerWithBackoff(t *testing.T) {
	src := newFakeSource()
	var sessions atomic.Int64
	src.listen = func(ctx context.Context, h store.BindingEvents) error {
		if sessions.Add(1) < 4 {
			return errors.New("connection refused")
		}
		h.BindingsReset()
		<-ctx.Done()
		return nil
	}
	reg := prometheus.NewRegistry()
	r := newResolver(t, src, testenv.NewClock(t0), func(o *Options) {
		o.Registry = reg
		o.ReconnectMin, o.ReconnectMax = time.Millisecond, 4*time.Millisecond
	})
	runResolver(t, r)
	waitFor(t, "listening after three failures", r.Listening)
	if got := testutil.ToFloat64(r.m.listenDrops); got != 3 {
		t.Fatalf("listen failures = %v, want 3", got)
	}
	if got := testutil.ToFloat64(r.m.listenUp); got != 1 {
		t.Fatalf("listen_up = %v, want 1", got)
	}
}

func TestRunAndResolveAfterClose(t *testing.T) {
	src := newFakeSource()
	r := newResolver(t, src, testenv.NewClock(t0), nil)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := r.Resolve(context.Background(), "oc_x", t0); !errors.Is(err, ErrClosed) || IsRetryable(err) {
		t.Fatalf("Resolve after Close = %v, want ErrClosed (not retryable)", err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
}

// TestCloseStopsRun: the component contract (D29).
func TestCloseStopsRun(t *testing.T) {
	r := newResolver(t, newFakeSource(), testenv.NewClock(t0), nil)
	conformance.CloseStopsRun(t, r, r.life.Running, ErrClosed)
}

func TestRunTwiceIsRefused(t *testing.T) {
	src := newFakeSource()
	r := newResolver(t, src, testenv.NewClock(t0), nil)
	runResolver(t, r)
	waitFor(t, "first Run started", r.life.Running)
	if err := r.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v, want ErrAlreadyRunning", err)
	}
}

func TestNewValidatesOptions(t *testing.T) {
	src := newFakeSource()
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Source: src, WorkspaceTypes: []string{"incident"}, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mod  func(*Options)
	}{
		{"no source", func(o *Options) { o.Source = nil }},
		{"no workspace types", func(o *Options) { o.WorkspaceTypes = nil }},
		{"empty workspace type", func(o *Options) { o.WorkspaceTypes = []string{""} }},
		{"negative lookback", func(o *Options) { o.Lookback = -time.Hour }},
		{"negative cache size", func(o *Options) { o.CacheSize = -1 }},
		{"fallback TTL above cache TTL", func(o *Options) { o.CacheTTL = time.Second; o.FallbackTTL = time.Minute }},
		{"reconnect min above max", func(o *Options) { o.ReconnectMin = time.Minute; o.ReconnectMax = time.Second }},
		{"metrics already registered", func(o *Options) { o.Registry = reg }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{Source: src, WorkspaceTypes: []string{"incident"}}
			tt.mod(&opts)
			if _, err := New(opts); !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
		})
	}
}
