package windows

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/storage"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/testenv"
	"github.com/larkline/larkline/internal/testenv/testkafka"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// cluster is one test's topics on the real broker.
type cluster struct {
	t                                   *testing.T
	brokers                             []string
	evidence, checkpoints, closed, dead string
	codecs                              *schemas.Codecs
	producer                            *kgo.Client
	gokaTopics                          map[string]bool // versions whose goka topics are dropped at cleanup
}

func newCluster(t *testing.T) *cluster {
	return newClusterOn(t, testenv.KafkaBrokers(t), testenv.NewTopic)
}

// newClusterOn is newCluster on the brokers whose topics newTopic creates (a test's
// private broker).
func newClusterOn(t *testing.T, brokers []string, newTopic func(testing.TB, int32, map[string]*string) string) *cluster {
	c := &cluster{t: t, brokers: brokers, codecs: mustCodecs(t)}
	compact := "compact"
	c.evidence = newTopic(t, 3, map[string]*string{"cleanup.policy": &compact})
	c.checkpoints = newTopic(t, 3, map[string]*string{"cleanup.policy": &compact})
	c.closed = newTopic(t, 3, specConfigs(t, kafka.DefaultTopicNames().WindowsClosed))
	c.dead = newTopic(t, 1, specConfigs(t, kafka.DefaultTopicNames().DeadLetter))
	c.producer = testkafka.Client(t, kafka.Options{Brokers: c.brokers, ClientID: "windows-it"})
	return c
}

// specConfigs are the configs DefaultTopicSpecs gives the named topic, so that tests
// run against the production settings (max.message.bytes above all).
func specConfigs(t testing.TB, name string) map[string]*string {
	t.Helper()
	for _, s := range kafka.DefaultTopicSpecs(kafka.DefaultTopicNames(), 1, 1) {
		if s.Name == name {
			out := make(map[string]*string, len(s.Configs))
			for k, v := range s.Configs {
				out[k] = &v
			}
			return out
		}
	}
	t.Fatalf("no default spec for topic %s", name)
	return nil
}

// uniqueVersion gives each test its own Goka group (and group table).
func uniqueVersion(t *testing.T) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return "it" + hex.EncodeToString(b)
}

func (c *cluster) produce(recs ...schemas.EvidenceRecord) {
	c.t.Helper()
	var krs []*kgo.Record
	for _, r := range recs {
		b, err := c.codecs.Evidence.Encode(context.Background(), r)
		if err != nil {
			c.t.Fatal(err)
		}
		krs = append(krs, &kgo.Record{Topic: c.evidence, Key: []byte(r.Key()), Value: b})
	}
	testkafka.Produce(c.t, c.producer, krs...)
}

func (c *cluster) produceCheckpoint(w ids.WorkspaceID, ch ids.ChatID, until time.Time) {
	c.t.Helper()
	b, err := c.codecs.Checkpoint.Encode(context.Background(), schemas.CollectionCheckpoint{
		WorkspaceID: w, ChatID: ch, CoveredUntil: until, CursorCreateTimeMS: until.UnixMilli() - 1,
		CursorMessageID: "om_cursor", UpdatedAt: until, ReconcileVersion: "it",
	})
	if err != nil {
		c.t.Fatal(err)
	}
	testkafka.Produce(c.t, c.producer, &kgo.Record{Topic: c.checkpoints, Key: []byte(ids.ChatKey(w, ch)), Value: b})
}

// instance is one running processor.
type instance struct {
	p    *Processor
	stop func()
	done chan struct{} // closed when Run returned
	err  error         // Run's error, once done is closed
	// failureExpected: the test checked Run's error itself.
	failureExpected bool
}

// exited reports whether Run returned (the processor failed or was stopped).
func (i *instance) exited() bool {
	select {
	case <-i.done:
		return true
	default:
		return false
	}
}

// runErr is Run's error once it returned, nil before.
func (i *instance) runErr() error {
	if !i.exited() {
		return nil
	}
	return i.err
}

// options are the processor options of a test instance of version.
func (c *cluster) options(version string, clock *testenv.Clock) Options {
	c.t.Helper()
	g, err := kafka.NewGoka(kafka.GokaOptions{
		Options:          kafka.Options{Brokers: c.brokers, ClientID: "windows-it-" + version},
		TableReplication: 1, StreamReplication: 1,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	copts, err := kafka.NewClientOptions(kafka.Options{Brokers: c.brokers, ClientID: "windows-it-publisher-" + version})
	if err != nil {
		c.t.Fatal(err)
	}
	o := Options{
		Client:  copts,
		Brokers: c.brokers, ProcessorVersion: version,
		EvidenceTopic: c.evidence, CheckpointTopic: c.checkpoints, ClosedTopic: c.closed, DeadLetterTopic: c.dead,
		Window: 10 * time.Minute, Grace: 3 * time.Minute, Retention: 72 * time.Hour,
		ScanInterval: 200 * time.Millisecond, Codecs: c.codecs, Clock: clock.Now,
		Emitter: g.EmitterOptions(),
		// Memory storage: a restarted instance must recover its state from the group table.
		Goka: append(g.ProcessorOptions(), goka.WithStorageBuilder(storage.MemoryBuilder())),
	}
	c.dropGokaTopics(o.GroupPrefix, version)
	return o
}

func (c *cluster) start(version string, clock *testenv.Clock, mutate func(*Options)) *instance {
	c.t.Helper()
	o := c.options(version, clock)
	if mutate != nil {
		mutate(&o)
	}
	p, err := New(o)
	if err != nil {
		c.t.Fatal(err)
	}
	c.dropGokaTopics(o.GroupPrefix, version)
	ctx, cancel := context.WithCancel(context.Background())
	inst := &instance{p: p, done: make(chan struct{})}
	go func() { inst.err = p.Run(ctx); close(inst.done) }()
	var once bool
	inst.stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		select {
		case <-inst.done:
			if err := inst.err; err != nil && !errors.Is(err, context.Canceled) && !inst.failureExpected {
				c.t.Errorf("processor run: %v", err)
			}
		case <-time.After(60 * time.Second):
			c.t.Errorf("processor did not drain within 60s")
		}
	}
	c.t.Cleanup(func() {
		inst.stop()
		if err := p.Close(); err != nil {
			c.t.Errorf("closing the processor: %v", err)
		}
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	if err := p.Goka().WaitForReadyContext(wctx); err != nil {
		c.t.Fatalf("processor not ready: %v", err)
	}
	return inst
}

// dropGokaTopics deletes the Goka loop and table topics of a processor version when
// the test ends (after its instances stopped).
func (c *cluster) dropGokaTopics(prefix, version string) {
	if c.gokaTopics[version] {
		return
	}
	if c.gokaTopics == nil {
		c.gokaTopics = map[string]bool{}
	}
	c.gokaTopics[version] = true
	group := string(GroupName(prefix, version))
	t := c.t
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := kadm.NewClient(c.producer).DeleteTopics(ctx, group+"-loop", group+"-table", GeometryTopic(prefix, version))
		if err == nil {
			_, _ = kadm.NewClient(c.producer).DeleteGroups(ctx, group, PublisherGroup(prefix, version))
		}
		if err == nil {
			err = resp.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("deleting the goka topics of %s: %v", group, err)
		}
	})
}

// closedRecords reads the closed topic from the start until want records arrived or the
// deadline passed, then waits a little longer to catch duplicates.
func (c *cluster) closedRecords(want int, within time.Duration) []schemas.ClosedWindow {
	c.t.Helper()
	var out []schemas.ClosedWindow
	for _, r := range c.closedRecordsRaw(want, within) {
		out = append(out, r.w)
	}
	return out
}

// sizedWindow is a closed record with its size on the topic (key and value).
type sizedWindow struct {
	w    schemas.ClosedWindow
	size int
}

// closedRecordsRaw is closedRecords with each record's size.
func (c *cluster) closedRecordsRaw(want int, within time.Duration) []sizedWindow {
	c.t.Helper()
	return c.closedRecordsWhile(want, within, nil)
}

// closedRecordsWhile is closedRecordsRaw whose deadline moves on by within every time
// progress (when not nil) has grown since it was last read: a test whose processor
// must read a large backlog first waits as long as the processor keeps reading, and
// fails when it stops, however loaded the machine is.
func (c *cluster) closedRecordsWhile(want int, within time.Duration, progress func() float64) []sizedWindow {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumeTopics(c.closed),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	var out []sizedWindow
	deadline := time.Now().Add(within)
	settle := time.Time{}
	var seen float64
	for {
		now := time.Now()
		if progress != nil {
			if p := progress(); p > seen {
				seen, deadline = p, now.Add(within)
			}
		}
		if now.After(deadline) || (!settle.IsZero() && now.After(settle)) {
			return out
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			w, err := c.codecs.ClosedWindow.Decode(context.Background(), r.Value)
			if err != nil {
				c.t.Fatalf("closed record: %v", err)
			}
			out = append(out, sizedWindow{w, len(r.Key) + len(r.Value)})
		})
		if len(out) >= want && settle.IsZero() {
			settle = time.Now().Add(2 * time.Second)
		}
	}
}

func chatRecord(w ids.WorkspaceID, ch ids.ChatID, msg string, at time.Time, label string) schemas.EvidenceRecord {
	r := evidenceRecord(msg, at, label)
	r.WorkspaceID, r.ChatID, r.SourceKey = w, ch, ids.MessageSourceKey(ch, ids.MessageID(msg))
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, 60*time.Second, what, cond)
}

func waitForWithin(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, within, what, cond)
}

// windowHolds reports whether the chat's open window at start took in n versions.
func windowHolds(p *Processor, chatKey string, start time.Time, n int) func() bool {
	return func() bool {
		v, err := p.Goka().Get(chatKey)
		if err != nil || v == nil {
			return false
		}
		c := v.(*chatValue)
		i, ok := c.find(start.UnixMilli())
		return ok && c.Open[i].Versions == int64(n)
	}
}

func TestIntegrationRestartMidWindow(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	a := c.start(version, clock, nil)
	c.produce(evidenceRecord("om_1", t0.Add(time.Minute), "1"), evidenceRecord("om_2", t0.Add(2*time.Minute), "2"))
	waitFor(t, "two messages in the window", windowHolds(a.p, ids.ChatKey(ws, chat), t0, 2))
	a.stop() // killed mid-window: the window is open, nothing emitted

	b := c.start(version, clock, nil) // recovers the group table
	waitFor(t, "table recovery reported as done", func() bool {
		return testutil.ToFloat64(b.p.m.tablePartitions.WithLabelValues("running")) == 3 &&
			testutil.ToFloat64(b.p.m.recoveryRemaining) == 0
	})
	c.produce(evidenceRecord("om_3", t0.Add(3*time.Minute), "3"))
	waitFor(t, "three versions after restart", windowHolds(b.p, ids.ChatKey(ws, chat), t0, 3))
	clock.Set(t0.Add(13 * time.Minute))
	got := c.closedRecords(1, 30*time.Second)
	if len(got) != 1 {
		t.Fatalf("want exactly one closed window, got %d", len(got))
	}
	if w := got[0]; w.EvidenceCount != 3 || w.EvidenceLowOffset != 0 || w.EvidenceEndOffset != 3 ||
		!w.FirstOccurredAt.Equal(t0.Add(time.Minute)) || !w.LastOccurredAt.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("window lost or doubled evidence across the restart: %+v", w)
	}
}

func TestIntegrationTwoInstancesShareChats(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	a := c.start(version, clock, nil)
	b := c.start(version, clock, nil) // rebalance: the two share the three partitions
	var recs []schemas.EvidenceRecord
	chats := 9
	for i := range chats {
		ch := ids.ChatID(fmt.Sprintf("oc_chat%02d", i))
		recs = append(recs, chatRecord(ws, ch, fmt.Sprintf("om_%02da", i), t0.Add(time.Minute), "a"),
			chatRecord(ws, ch, fmt.Sprintf("om_%02db", i), t0.Add(2*time.Minute), "b"))
	}
	c.produce(recs...)
	for i := range chats {
		key := ids.ChatKey(ws, ids.ChatID(fmt.Sprintf("oc_chat%02d", i)))
		waitFor(t, "chat "+key+" in one instance", func() bool {
			return windowHolds(a.p, key, t0, 2)() || windowHolds(b.p, key, t0, 2)()
		})
	}
	clock.Set(t0.Add(13 * time.Minute))
	got := c.closedRecords(chats, 60*time.Second)
	if len(got) != chats {
		t.Fatalf("want %d closed windows (one per chat), got %d", chats, len(got))
	}
	seen := map[ids.ChatID]bool{}
	for _, w := range got {
		if seen[w.ChatID] || w.EvidenceCount != 2 {
			t.Fatalf("chat %s closed twice or incomplete: %+v", w.ChatID, w)
		}
		seen[w.ChatID] = true
	}
}

// TestIntegrationHandoverAndBack: chats whose partition goes to a second instance
// and comes back when it leaves lose no evidence (D41): before, the first instance's
// note run went on where the second one's had moved the chats' chains, and every
// note after the return was refused as overtaken.
func TestIntegrationHandoverAndBack(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	a := c.start(version, clock, nil)
	const chats = 9
	chat := func(i int) ids.ChatID { return ids.ChatID(fmt.Sprintf("oc_hand%02d", i)) }
	key := func(i int) string { return ids.ChatKey(ws, chat(i)) }
	say := func(label string, at time.Duration) {
		var recs []schemas.EvidenceRecord
		for i := range chats {
			recs = append(recs, chatRecord(ws, chat(i), fmt.Sprintf("om_%02d%s", i, label), t0.Add(at), label))
		}
		c.produce(recs...)
	}
	say("a", time.Minute)
	for i := range chats {
		waitFor(t, "chat "+key(i)+" in the first instance", windowHolds(a.p, key(i), t0, 1))
	}
	b := c.start(version, clock, nil) // rebalance: b takes some partitions
	// From here the instances rebalance: their metrics, not Goka's Get (which races
	// with a partition table's set-up), tell what the chats applied.
	applied := func(outcome string) float64 {
		return testutil.ToFloat64(a.p.m.evidence.WithLabelValues(outcome)) +
			testutil.ToFloat64(b.p.m.evidence.WithLabelValues(outcome))
	}
	say("b", 2*time.Minute)
	waitFor(t, "the second messages applied", func() bool { return applied(outOpened)+applied(outAdded) == 2*chats })
	b.stop() // b leaves: its partitions come back to a
	say("c", 3*time.Minute)
	waitFor(t, "the third messages applied", func() bool {
		if n := applied(outOvertaken); n > 0 {
			t.Fatalf("%.0f notes refused as overtaken after the handover", n)
		}
		return applied(outOpened)+applied(outAdded) == 3*chats
	})
	c.closeEach(clock, chats, 3)
}

// closeEach moves the clock past the grace of the window at t0 and expects one closed
// window per chat, each with all n of its messages.
func (c *cluster) closeEach(clock *testenv.Clock, chats, n int) {
	c.t.Helper()
	clock.Set(t0.Add(13 * time.Minute))
	got := c.closedRecords(chats, 60*time.Second)
	if len(got) != chats {
		c.t.Fatalf("want %d closed windows (one per chat), got %d", chats, len(got))
	}
	for _, w := range got {
		if w.EvidenceCount != n {
			c.t.Errorf("chat %s closed with %d of its %d messages", w.ChatID, w.EvidenceCount, n)
		}
	}
}

func TestIntegrationPeriodicScanWithoutWakeup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0)
	a := c.start(version, clock, nil)
	c.produce(evidenceRecord("om_1", t0.Add(time.Minute), "1"))
	waitFor(t, "the window", windowHolds(a.p, ids.ChatKey(ws, chat), t0, 1))
	// Lose every pending wakeup: only the periodic scan can close the window now.
	select {
	case <-a.p.wake:
	default:
	}
	clock.Set(t0.Add(13 * time.Minute))
	if got := c.closedRecords(1, 30*time.Second); len(got) != 1 {
		t.Fatalf("periodic scan did not close the quiet chat's window: %d records", len(got))
	}
}

func TestIntegrationCoverageGating(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	version, clock := uniqueVersion(t), testenv.NewClock(t0.Add(30*time.Minute))
	a := c.start(version, clock, func(o *Options) { o.RequireCoverage = true })
	c.produce(evidenceRecord("om_1", t0.Add(time.Minute), "1"))
	waitFor(t, "the window", windowHolds(a.p, ids.ChatKey(ws, chat), t0, 1))
	if got := c.closedRecords(0, 2*time.Second); len(got) != 0 {
		t.Fatalf("closed before history covered the window: %+v", got)
	}
	c.produceCheckpoint(ws, chat, t0.Add(10*time.Minute))
	got := c.closedRecords(1, 30*time.Second)
	if len(got) != 1 || got[0].Reason != ReasonGraceElapsedCovered {
		t.Fatalf("want one window closed on coverage, got %+v", got)
	}
}

func TestIntegrationReplayAlongsideOldVersion(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	clock := testenv.NewClock(t0)
	v1 := uniqueVersion(t)
	c.start(v1, clock, nil)
	c.produce(evidenceRecord("om_1", t0.Add(time.Minute), "1"),
		evidenceRecord("om_2", t0.Add(11*time.Minute), "2"))
	clock.Set(t0.Add(30 * time.Minute))
	if got := c.closedRecords(2, 30*time.Second); len(got) != 2 {
		t.Fatalf("v1 closed %d windows, want 2", len(got))
	}
	v2 := uniqueVersion(t) // a new processor version replays the topic from the start
	c.start(v2, clock, nil)
	got := c.closedRecords(4, 60*time.Second)
	byVersion := map[string][]string{}
	for _, w := range got {
		byVersion[w.ProcessorVersion] = append(byVersion[w.ProcessorVersion],
			fmt.Sprintf("%s/%d/[%d,%d)", w.WindowStart.Format("15:04"), w.EvidenceCount, w.EvidenceLowOffset, w.EvidenceEndOffset))
	}
	for _, v := range []string{v1, v2} {
		sort.Strings(byVersion[v])
	}
	if len(byVersion[v1]) != 2 || fmt.Sprint(byVersion[v1]) != fmt.Sprint(byVersion[v2]) {
		t.Fatalf("replay did not reproduce v1's windows: %v", byVersion)
	}
}
