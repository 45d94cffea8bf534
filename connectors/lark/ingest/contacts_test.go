package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/larkline/larkline/connectors/lark/larkapi"
	"github.com/larkline/larkline/internal/conformance"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/schemas"
)

// fakeDirectory answers from a map and records every batch it is asked.
type fakeDirectory struct {
	mu      sync.Mutex
	names   map[string]string
	batches [][]string
	err     error
}

func (d *fakeDirectory) Names(_ context.Context, ids []string) (map[string]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.batches = append(d.batches, append([]string(nil), ids...))
	if d.err != nil {
		return nil, d.err
	}
	out := map[string]string{}
	for _, id := range ids {
		if n, ok := d.names[id]; ok {
			out[id] = n
		}
	}
	return out, nil
}

func (d *fakeDirectory) calls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.batches)
}

func newContacts(t *testing.T, dir Directory, mod func(*ContactsOptions)) *Contacts {
	t.Helper()
	o := ContactsOptions{Directory: dir, BatchWait: 5 * time.Millisecond, RequestsPerSecond: 1000, Registry: prometheus.NewRegistry()}
	if mod != nil {
		mod(&o)
	}
	c, err := NewContacts(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runContacts(t *testing.T, c *Contacts) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestContactsBatchAndCache(t *testing.T) {
	dir := &fakeDirectory{names: map[string]string{"ou_a": "Ann", "ou_b": "Bo"}}
	clk := testenv.NewClock(time.Now())
	c := newContacts(t, dir, func(o *ContactsOptions) { o.Clock = clk.Now; o.TTL = time.Hour; o.NegativeTTL = time.Minute })
	for _, id := range []string{"ou_a", "ou_b", "ou_nobody", "ou_a"} {
		if _, ok := c.Name(id); ok {
			t.Fatalf("%s known before Run", id)
		}
	}
	runContacts(t, c)
	waitUntil(t, "names resolved", func() bool { n, ok := c.Name("ou_a"); return ok && n == "Ann" })
	if n, _ := c.Name("ou_b"); n != "Bo" {
		t.Fatalf("ou_b = %q", n)
	}
	if dir.calls() != 1 || len(dir.batches[0]) != 3 {
		t.Fatalf("batches %v, want one batch of the three distinct ids", dir.batches)
	}
	// The unknown id is not asked again before the negative TTL… (Name queues a
	// lookup before it returns, so nothing queued now means none will be made.)
	c.Name("ou_nobody")
	if q := queuedLookups(c); len(q) != 0 || dir.calls() != 1 {
		t.Fatalf("unknown id looked up again within its negative TTL: queued %v, batches %v", q, dir.batches)
	}
	// …but is after it, and a stale name is served while it is refreshed.
	clk.Advance(2 * time.Hour)
	if n, ok := c.Name("ou_a"); !ok || n != "Ann" {
		t.Fatalf("stale name not served: %q %v", n, ok)
	}
	c.Name("ou_nobody")
	waitUntil(t, "refresh batch", func() bool { return dir.calls() == 2 })
	if got := testutil.ToFloat64(c.m.lookups.WithLabelValues("stale")); got != 2 { // ou_a and the expired negative entry
		t.Fatalf("stale lookups = %v", got)
	}
}

func TestContactsQueueIsBounded(t *testing.T) {
	dir := &fakeDirectory{}
	c := newContacts(t, dir, func(o *ContactsOptions) { o.QueueSize = 2 })
	for _, id := range []string{"ou_1", "ou_2", "ou_3", "ou_4", "ou_1"} {
		c.Name(id)
	}
	if got := testutil.ToFloat64(c.m.dropped); got != 2 {
		t.Fatalf("dropped = %v, want 2 (ou_3, ou_4; ou_1 is already queued)", got)
	}
	runContacts(t, c)
	waitUntil(t, "queued ids looked up", func() bool { return dir.calls() == 1 })
	// Dropped ids are queued again when seen again.
	c.Name("ou_3")
	waitUntil(t, "a dropped id queued again", func() bool { return dir.calls() == 2 })
}

func TestContactsFailedLookupIsRetriedWhenSeenAgain(t *testing.T) {
	dir := &fakeDirectory{names: map[string]string{"ou_a": "Ann"}, err: &larkapi.APIError{Op: "x", Status: 429, Code: larkapi.CodeRateLimited, RetryAfter: 10 * time.Millisecond}}
	c := newContacts(t, dir, nil)
	runContacts(t, c)
	c.Name("ou_a")
	waitUntil(t, "first (failing) lookup", func() bool { return dir.calls() == 1 })
	dir.mu.Lock()
	dir.err = nil
	dir.mu.Unlock()
	waitUntil(t, "resolved after the failure", func() bool { n, ok := c.Name("ou_a"); return ok && n == "Ann" })
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("retryable_error")); got != 1 {
		t.Fatalf("retryable errors = %v", got)
	}
}

func TestContactsObserveAndClean(t *testing.T) {
	dir := &fakeDirectory{}
	c := newContacts(t, dir, nil)
	c.Observe("ou_m", "  Maya\u0000 Chen\n")
	if n, ok := c.Name("ou_m"); !ok || n != "Maya  Chen" {
		t.Fatalf("observed name = %q %v", n, ok)
	}
	c.Observe("not-an-open-id", "X")
	c.Observe("ou_empty", "   ")
	if _, ok := c.Name("ou_empty"); ok {
		t.Fatal("an empty observed name was kept")
	}
	long := strings.Repeat("名", 200) // 600 bytes
	if got := cleanName(long); len(got) > schemas.MaxDisplayNameBytes || !utf8.ValidString(got) {
		t.Fatalf("cleanName kept %d bytes (valid %v)", len(got), utf8.ValidString(got))
	}
	if got := cleanName("a\xffb"); got != "ab" {
		t.Fatalf("cleanName(invalid UTF-8) = %q", got)
	}
	if _, ok := c.Name("not-an-open-id"); ok {
		t.Fatal("an invalid id has a name")
	}
}

func TestContactsOptionsAndLifecycle(t *testing.T) {
	dir := &fakeDirectory{}
	bad := []ContactsOptions{
		{},
		{Directory: dir, BatchSize: larkapi.MaxDirectoryBatch + 1},
		{Directory: dir, Size: -1},
		{Directory: dir, TTL: -time.Second},
		{Directory: dir, RequestsPerSecond: -1},
	}
	for i, o := range bad {
		if _, err := NewContacts(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%d: NewContacts = %v, want ErrInvalidOptions", i, err)
		}
	}
	c := newContacts(t, dir, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close = %v", err)
	}
}

// TestContactsCloseStopsRun: the component contract (D29).
func TestContactsCloseStopsRun(t *testing.T) {
	c := newContacts(t, &fakeDirectory{}, nil)
	conformance.CloseStopsRun(t, c, c.life.Running, ErrClosed)
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int](2)
	c.put("a", 1)
	c.put("b", 2)
	if _, ok := c.get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	if ev := c.put("c", 3); ev != 1 {
		t.Fatalf("evicted %d, want 1", ev)
	}
	if _, ok := c.get("b"); ok {
		t.Fatal("b should have been evicted")
	}
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Fatal("a lost")
	}
	if ev := c.put("a", 10); ev != 0 || c.len() != 2 {
		t.Fatalf("update evicted %d, len %d", ev, c.len())
	}
	if v, _ := c.get("a"); v != 10 {
		t.Fatalf("a = %d", v)
	}
}

func TestProduceWaitIsBoundedByTheEventTimeout(t *testing.T) {
	p := &gatedProducer{gate: make(chan struct{}), entered: make(chan struct{}, 1), next: &recordingProducer{}}
	t.Cleanup(func() { close(p.gate) })
	u := newUnit(t, unitOptions{key: tKey, producer: p})
	u.src.bind(tChat, tWS, "firing", time.Now().Add(-time.Hour))
	u.ing.timeout = 200 * time.Millisecond
	a := u.post(envJSON(t, u.builder.Text(msg("om_stuck", time.Now()), "hi")))
	if a.status != 503 || a.body["reason"] != ReasonKafkaUnavailable {
		t.Fatalf("answer %d %v, want 503 %s", a.status, a.body, ReasonKafkaUnavailable)
	}
	if got := testutil.ToFloat64(u.ing.m.records.WithLabelValues("abandoned")); got != 1 {
		t.Fatalf("abandoned records = %v, want 1", got)
	}
}

// queuedLookups are the ids Name has queued and Run has not yet looked up.
func queuedLookups(c *Contacts) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	return ids
}
