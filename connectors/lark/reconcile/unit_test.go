package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/larkline/larkline/connectors/lark/evidence"
	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/connectors/lark/normalize"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

var now0 = time.Date(2026, 3, 10, 12, 0, 30, 400_000_000, time.UTC)

func TestMakePlan(t *testing.T) {
	at := func(d time.Duration) *time.Time { v := now0.Add(d); return &v }
	cp := func(pos time.Duration, lastFull *time.Time) *store.Checkpoint {
		return &store.Checkpoint{Position: store.CheckpointPosition{Time: now0.Add(pos), MessageID: "om_x"}, Meta: store.CheckpointMeta{LastFullScanAt: lastFull}}
	}
	base := planInput{
		now: now0, lookback: 72 * time.Hour, settle: 5 * time.Second, overlap: 10 * time.Minute,
		refreshInterval: time.Hour, refreshLookback: 24 * time.Hour,
	}
	end := time.Date(2026, 3, 10, 12, 0, 25, 0, time.UTC) // now − settle, whole seconds
	tests := []struct {
		name      string
		mod       func(*planInput)
		kind      Kind
		start     time.Time
		bound     time.Time
		fullScan  bool
		emptyPlan bool
	}{
		{"backfill of a young workspace starts at its creation", func(p *planInput) { p.workspaceCreated = now0.Add(-2 * time.Hour) },
			KindBackfill, now0.Add(-2 * time.Hour), now0.Add(-2 * time.Hour), true, false},
		{"backfill is capped at the lookback", func(p *planInput) { p.workspaceCreated = now0.Add(-100 * time.Hour) },
			KindBackfill, now0.Add(-72 * time.Hour), now0.Add(-72 * time.Hour), true, false},
		{"retention caps below the lookback", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.retention = 24 * time.Hour
		}, KindBackfill, now0.Add(-24 * time.Hour), now0.Add(-24 * time.Hour), true, false},
		{"an unfinished backfill resumes from its checkpoint minus the overlap", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.checkpoint = cp(-30*time.Hour, nil)
		}, KindBackfill, now0.Add(-30*time.Hour - 10*time.Minute), now0.Add(-50 * time.Hour), true, false},
		{"incremental from the checkpoint minus the overlap", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.checkpoint = cp(-5*time.Minute, at(-10*time.Minute))
		}, KindIncremental, now0.Add(-15 * time.Minute), now0.Add(-50 * time.Hour), false, false},
		{"incremental never reads before the workspace", func(p *planInput) {
			p.workspaceCreated = now0.Add(-12 * time.Minute)
			p.checkpoint = cp(-5*time.Minute, at(-10*time.Minute))
		}, KindIncremental, now0.Add(-12 * time.Minute), now0.Add(-12 * time.Minute), true, false},
		{"refresh when the last full scan is older than the interval", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.checkpoint = cp(-5*time.Minute, at(-61*time.Minute))
		}, KindRefresh, now0.Add(-24 * time.Hour), now0.Add(-50 * time.Hour), true, false},
		{"refresh of a young workspace starts at its creation", func(p *planInput) {
			p.workspaceCreated = now0.Add(-3 * time.Hour)
			p.checkpoint = cp(-5*time.Minute, at(-2*time.Hour))
		}, KindRefresh, now0.Add(-3 * time.Hour), now0.Add(-3 * time.Hour), true, false},
		{"refresh contains a lagging incremental range", func(p *planInput) {
			p.workspaceCreated = now0.Add(-70 * time.Hour)
			p.checkpoint = cp(-40*time.Hour, at(-2*time.Hour))
		}, KindRefresh, now0.Add(-40*time.Hour - 10*time.Minute), now0.Add(-70 * time.Hour), true, false},
		{"manual reads the whole bound of a workspace whatever its checkpoint", func(p *planInput) {
			p.workspaceCreated = now0.Add(-100 * time.Hour)
			p.checkpoint = cp(-time.Minute, at(-time.Minute))
			p.manual = true
		}, KindManual, now0.Add(-72 * time.Hour), now0.Add(-72 * time.Hour), true, false},
		{"a checkpoint ahead of now leaves nothing to read", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.overlap = 0
			p.checkpoint = cp(time.Minute, at(-time.Minute))
		}, KindIncremental, now0.Add(time.Minute), now0.Add(-50 * time.Hour), false, true},
		{"a workspace created in the future has nothing to read", func(p *planInput) { p.workspaceCreated = now0.Add(time.Hour) },
			KindBackfill, now0.Add(time.Hour), now0.Add(time.Hour), true, true},
		{"a coverage run stays incremental when a refresh is due", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.checkpoint = cp(-5*time.Minute, at(-61*time.Minute))
			p.coverage = true
		}, KindIncremental, now0.Add(-15 * time.Minute), now0.Add(-50 * time.Hour), false, false},
		{"a continuation starts at the checkpoint, not before the overlap", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.checkpoint = cp(-5*time.Minute, at(-61*time.Minute))
			p.continued = true
		}, KindIncremental, now0.Add(-5 * time.Minute), now0.Add(-50 * time.Hour), false, false},
		{"a continued backfill starts at its checkpoint", func(p *planInput) {
			p.workspaceCreated = now0.Add(-50 * time.Hour)
			p.checkpoint = cp(-30*time.Hour, nil)
			p.continued = true
		}, KindBackfill, now0.Add(-30 * time.Hour), now0.Add(-50 * time.Hour), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			tt.mod(&in)
			p := makePlan(in)
			if p.kind != tt.kind || !p.start.Equal(tt.start) || !p.bound.Equal(tt.bound) || p.fullScan != tt.fullScan || p.empty() != tt.emptyPlan {
				t.Fatalf("plan = %+v, want kind %s start %s bound %s fullScan %v empty %v", p, tt.kind, tt.start, tt.bound, tt.fullScan, tt.emptyPlan)
			}
			if !p.end.Equal(end) {
				t.Fatalf("end = %s, want %s", p.end, end)
			}
			if p.start.Before(p.bound) {
				t.Fatalf("start %s before bound %s", p.start, p.bound)
			}
		})
	}
}

func TestKindIngestPath(t *testing.T) {
	for k, want := range map[Kind]schemas.IngestPath{
		KindBackfill: schemas.IngestReconcile, KindIncremental: schemas.IngestReconcile,
		KindRefresh: schemas.IngestRefresh, KindManual: schemas.IngestManual,
	} {
		if got := k.IngestPath(); got != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	const minB, maxB = 500 * time.Millisecond, 30 * time.Second
	tests := []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{"first retry, no jitter", 0, 0, 0, 250 * time.Millisecond},
		{"first retry, full jitter", 0, 0, 1, 500 * time.Millisecond},
		{"grows exponentially", 3, 0, 1, 4 * time.Second},
		{"capped", 10, 0, 1, maxB},
		{"capped, half jitter", 10, 0, 0, maxB / 2},
		{"huge attempt stays capped", 200, 0, 0.5, 22500 * time.Millisecond},
		{"rate limit reset honoured above the backoff", 0, 7 * time.Second, 0.5, 7 * time.Second},
		{"rate limit reset honoured above the cap", 1, 45 * time.Second, 0.5, 45 * time.Second},
		{"absurd reset is bounded", 1, 10 * time.Hour, 0.5, larkapi.MaxRetryAfter},
		{"backoff above a short reset", 4, time.Second, 1, 8 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryDelay(tt.attempt, minB, maxB, tt.retryAfter, func() float64 { return tt.jitter }); got != tt.want {
				t.Fatalf("backoff = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestLimiter(t *testing.T) {
	t.Run("burst then the rate", func(t *testing.T) {
		ft := testenv.NewClock(now0)
		l, err := NewLimiter(LimiterOptions{RequestsPerSecond: 4, Burst: 2, Clock: ft.Now, Sleep: ft.Sleep})
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			if err := l.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		// Two from the burst, then one every 250 ms.
		want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond}
		if fmt.Sprint(ft.Sleeps()) != fmt.Sprint(want) {
			t.Fatalf("sleeps %v, want %v", ft.Sleeps(), want)
		}
	})
	t.Run("a pause holds every caller and empties the bucket", func(t *testing.T) {
		ft := testenv.NewClock(now0)
		l, err := NewLimiter(LimiterOptions{RequestsPerSecond: 10, Burst: 5, Clock: ft.Now, Sleep: ft.Sleep})
		if err != nil {
			t.Fatal(err)
		}
		l.Pause(now0.Add(3 * time.Second))
		l.Pause(now0.Add(time.Second)) // never shortens
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(ft.Sleeps()) != 1 || ft.Sleeps()[0] < 3*time.Second {
			t.Fatalf("sleeps %v, want one of at least 3s", ft.Sleeps())
		}
		// No burst after the pause: the next call waits for a token.
		if err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(ft.Sleeps()) != 2 || ft.Sleeps()[1] <= 0 {
			t.Fatalf("sleeps %v, want a second wait after the pause", ft.Sleeps())
		}
	})
	t.Run("cancelled wait gives the token back", func(t *testing.T) {
		ft := testenv.NewClock(now0)
		l, err := NewLimiter(LimiterOptions{RequestsPerSecond: 1, Burst: 1, Clock: ft.Now, Sleep: ft.Sleep})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := l.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want canceled", err)
		}
		if err := l.Wait(context.Background()); err != nil || len(ft.Sleeps()) != 0 {
			t.Fatalf("Wait = %v with sleeps %v, want the unused token", err, ft.Sleeps())
		}
	})
	t.Run("invalid options", func(t *testing.T) {
		for _, o := range []LimiterOptions{{RequestsPerSecond: 0, Burst: 1}, {RequestsPerSecond: 51, Burst: 1}, {RequestsPerSecond: 1, Burst: 0}} {
			if _, err := NewLimiter(o); !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("NewLimiter(%+v) = %v, want ErrInvalidOptions", o, err)
			}
		}
	})
}

func TestOptionsValidation(t *testing.T) {
	valid := func() Options {
		codecs, err := schemas.NewCodecs(schemas.Topics{})
		if err != nil {
			t.Fatal(err)
		}
		n, err := normalize.New(normalize.Options{SelfAppID: "cli_x"})
		if err != nil {
			t.Fatal(err)
		}
		return Options{Store: nilStore{}, Eligibility: nilEligibility{}, Chats: nilChats{}, History: nilHistory{}, Normalizer: n, Producer: nilProducer{},
			EvidenceCodec: codecs.Evidence, CheckpointCodec: codecs.Checkpoint}
	}
	tests := []struct {
		name string
		mod  func(*Options)
		ok   bool
	}{
		{"defaults", func(*Options) {}, true},
		{"missing store", func(o *Options) { o.Store = nil }, false},
		{"missing history", func(o *Options) { o.History = nil }, false},
		{"missing chat guard", func(o *Options) { o.Chats = nil }, false},
		{"missing checkpoint codec", func(o *Options) { o.CheckpointCodec = nil }, false},
		{"same topics", func(o *Options) { o.EvidenceTopic, o.CheckpointTopic = "t", "t" }, false},
		{"page size above Lark's limit", func(o *Options) { o.PageSize = 51 }, false},
		{"negative overlap", func(o *Options) { o.ReconcileOverlap = -time.Second }, false},
		{"refresh lookback beyond the ingestion lookback", func(o *Options) { o.EvidenceRefreshLookback = 100 * time.Hour }, false},
		{"overlap above the refresh lookback", func(o *Options) { o.ReconcileOverlap = 25 * time.Hour }, false},
		{"min backoff above max", func(o *Options) { o.MinBackoff = time.Minute }, false},
		{"rate above Lark's limit", func(o *Options) { o.RequestsPerSecond = 100 }, false},
		{"threads per chat not below the page budget", func(o *Options) { o.MaxThreadsPerChat = 100 }, false},
		{"manual budget below the run budget", func(o *Options) { o.MaxPagesPerManualRefresh = 10 }, false},
		{"thread window below the overlap", func(o *Options) { o.ThreadActiveWindow = time.Minute }, false},
		{"settle not below the interval", func(o *Options) { o.Settle = 10 * time.Minute }, false},
		{"no retries", func(o *Options) { o.MaxRetries = new(0) }, true},
		{"negative retries", func(o *Options) { o.MaxRetries = new(-1) }, false},
		{"retries above 100", func(o *Options) { o.MaxRetries = new(101) }, false},
		{"shared limiter", func(o *Options) {
			l, err := NewLimiter(LimiterOptions{RequestsPerSecond: 5, Burst: 1})
			if err != nil {
				t.Fatal(err)
			}
			o.Limiter = l
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mod(&o)
			r, err := New(o)
			if tt.ok {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				_ = r.Close()
				return
			}
			if !errors.Is(err, ErrInvalidOptions) {
				t.Fatalf("New = %v, want ErrInvalidOptions", err)
			}
		})
	}
	t.Run("defaults are the documented ones", func(t *testing.T) {
		o, err := valid().withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if o.IngestionLookback != 72*time.Hour || o.ReconcileInterval != 5*time.Minute || o.ReconcileOverlap != 10*time.Minute ||
			o.EvidenceRefreshInterval != time.Hour || o.EvidenceRefreshLookback != 24*time.Hour || o.PageSize != 50 ||
			o.MaxPagesPerRun != 100 || o.MaxConcurrentChats != 4 || *o.MaxRetries != 5 || o.MaxBackoff != 30*time.Second {
			t.Fatalf("defaults: %+v", o)
		}
	})
	t.Run("retries: nil is the default, 0 is none", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			given *int
			want  int
		}{{"nil", nil, DefaultMaxRetries}, {"0", new(0), 0}, {"3", new(3), 3}} {
			o := valid()
			o.MaxRetries = tc.given
			d, err := o.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if *d.MaxRetries != tc.want {
				t.Errorf("MaxRetries %s: %d retries, want %d", tc.name, *d.MaxRetries, tc.want)
			}
		}
	})
	t.Run("closed reconciler", func(t *testing.T) {
		r, err := New(valid())
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
		_ = r.Close()
		if err := r.Run(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Run after Close = %v", err)
		}
		if _, err := r.RunOnce(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("RunOnce after Close = %v", err)
		}
		if _, err := r.Refresh(context.Background(), "ws-1"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Refresh after Close = %v", err)
		}
	})
}

func TestIsRetryableAndOutcome(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		retryable bool
		outcome   string
	}{
		{"nil", nil, false, outcomeOK},
		{"rate limit 429", &larkapi.APIError{Status: http.StatusTooManyRequests, Code: larkapi.CodeRateLimited}, true, outcomeRateLimited},
		{"rate limit code with 400", &larkapi.APIError{Status: http.StatusBadRequest, Code: larkapi.CodeRateLimited}, true, outcomeRateLimited},
		{"server error", &larkapi.APIError{Status: http.StatusInternalServerError, Code: 500}, true, outcomeServerError},
		{"bot not in chat", &larkapi.APIError{Status: http.StatusBadRequest, Code: 230002}, false, outcomeRefused},
		{"invalid token is retried", &larkapi.APIError{Status: http.StatusBadRequest, Code: 99991663}, true, outcomeRefused},
		{"no answer", &larkapi.APIError{Err: syscall.ECONNREFUSED}, true, outcomeTransport},
		{"wrapped", fmt.Errorf("list: %w", &larkapi.APIError{Status: 503}), true, outcomeServerError},
		{"cancelled", &larkapi.APIError{Err: context.Canceled}, false, outcomeCanceled},
		{"kafka retryable", kerr.NotLeaderForPartition, true, outcomeTransport},
		{"kafka fatal", kerr.MessageTooLarge, false, outcomeTransport},
		{"store conflict", store.ErrConflict, false, outcomeTransport},
		{"malformed page", larkapi.ErrMalformedPage, false, outcomeMalformed},
		{"invalid query", larkapi.ErrInvalidQuery, false, outcomeInvalid},
		{"closed", ErrClosed, false, outcomeTransport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsRetryable(tt.err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retryable)
			}
			if got := apiOutcome(tt.err); got != tt.outcome {
				t.Errorf("apiOutcome = %q, want %q", got, tt.outcome)
			}
		})
	}
}

func TestVersionDecision(t *testing.T) {
	msg := normalize.Message{ContentHash: "h2", UpdatedAt: now0}
	tests := []struct {
		name   string
		msg    normalize.Message
		stored *store.Evidence
		want   string
	}{
		{"nothing stored", msg, nil, msgProduced},
		{"same hash", msg, &store.Evidence{ContentHash: "h2", SourceUpdatedAt: now0}, msgUnchanged},
		{"edited", msg, &store.Evidence{ContentHash: "h1", SourceUpdatedAt: now0.Add(-time.Minute)}, msgProduced},
		{"stored newer", msg, &store.Evidence{ContentHash: "h3", SourceUpdatedAt: now0.Add(time.Minute)}, msgStale},
		{"stored recall outranks a live copy", msg, &store.Evidence{ContentHash: "hd", Deleted: true, SourceUpdatedAt: now0.Add(-time.Minute)}, msgStale},
		{"recall replaces a live version", normalize.Message{ContentHash: "hd", Deleted: true, UpdatedAt: now0}, &store.Evidence{ContentHash: "h1", SourceUpdatedAt: now0.Add(-time.Minute)}, msgProduced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := versionDecision(&tt.msg, tt.stored); got != tt.want {
				t.Fatalf("decision %q, want %q", got, tt.want)
			}
		})
	}
}

func TestThreadRegistry(t *testing.T) {
	g := newThreadRegistry(2)
	g.observe("oc_a", "omt_1", now0)
	g.observe("oc_a", "omt_2", now0.Add(time.Minute))
	g.observe("oc_a", "omt_1", now0.Add(-time.Hour)) // older activity never moves back
	g.observe("oc_a", "", now0)                      // not a thread
	g.observe("oc_a", "omt_3", now0.Add(2*time.Minute))
	if got := fmt.Sprint(g.threads("oc_a", time.Time{})); got != "[omt_3 omt_2]" {
		t.Fatalf("threads %s: the least recently active must be evicted", got)
	}
	if got := fmt.Sprint(g.threads("oc_a", now0.Add(90*time.Second))); got != "[omt_3]" {
		t.Fatalf("active threads %s", got)
	}
	g.forget("oc_a", "omt_3")
	if got := fmt.Sprint(g.threads("oc_a", time.Time{})); got != "[omt_2]" {
		t.Fatalf("after forget: %s", got)
	}
	g.markSeeded("oc_a")
	if !g.seeded("oc_a") {
		t.Fatal("not seeded")
	}
	g.retain(map[ids.ChatID]bool{"oc_b": true})
	if g.seeded("oc_a") || len(g.threads("oc_a", time.Time{})) != 0 {
		t.Fatal("retain kept a chat no longer scanned")
	}
}

// Seams that must never be called (options validation only).
type (
	nilStore       struct{ Store }
	nilEligibility struct{ evidence.Eligibility }
	nilChats       struct{ ChatGuard }
	nilHistory     struct{ History }
	nilProducer    struct{ evidence.Producer }
)

func TestFailureReasons(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&larkapi.APIError{Status: http.StatusTooManyRequests, Code: larkapi.CodeRateLimited}, reasonLarkRateLimited},
		{&larkapi.APIError{Status: http.StatusBadGateway}, reasonLarkUnavailable},
		{&larkapi.APIError{Err: syscall.ECONNRESET}, reasonLarkUnavailable},
		{&larkapi.APIError{Status: http.StatusBadRequest, Code: 230002}, reasonLarkRefused},
		{fmt.Errorf("page: %w", larkapi.ErrMalformedPage), reasonLarkMalformed},
		{context.Canceled, reasonCanceled},
	}
	for _, tt := range tests {
		if got := larkFailureReason(tt.err); got != tt.want {
			t.Errorf("larkFailureReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	inner := fail(reasonKafka, errInjected)
	if got := failureReason(fail(reasonStore, fmt.Errorf("outer: %w", inner))); got != reasonKafka {
		t.Errorf("an outer reason replaced the inner one: %q", got)
	}
	if got := failureReason(errors.New("x")); got != reasonOther {
		t.Errorf("unclassified error: %q", got)
	}
	if got := failureReason(fmt.Errorf("x: %w", context.Canceled)); got != reasonCanceled {
		t.Errorf("cancellation: %q", got)
	}
}
