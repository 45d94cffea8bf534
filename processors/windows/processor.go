package windows

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/lifecycle"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/schemas"
	"github.com/larkline/larkline/schemas/ids"
)

// Options configure a Processor. Zero values are errors unless a default is named.
type Options struct {
	Brokers          []string
	ProcessorVersion string // group <GroupPrefix>-windows-<version>
	GroupPrefix      string // default DefaultGroupPrefix
	EvidenceTopic    string
	CheckpointTopic  string // read only when RequireCoverage
	// ClosedTopic receives the closed records, and is read back (co-partitioned with
	// the evidence topic) to move a window from closing to closed.
	ClosedTopic     string
	DeadLetterTopic string

	Window          time.Duration // synthesisWindow
	Grace           time.Duration // synthesisWindowCloseGrace
	RequireCoverage bool          // reconciliationEnabled: hold windows until history covers them
	// Retention bounds state: evidence whose window ended longer ago is aged out, and
	// closed marks are dropped after it (ingestionLookback).
	Retention    time.Duration
	ScanInterval time.Duration // synthesisScanInterval
	// ReemitAfter: a window whose closed record has not been read back this long
	// after its last emit is emitted again, byte for byte. Default
	// max(ScanInterval, DefaultReemitAfter).
	ReemitAfter time.Duration
	// OversizedVersions: a window that takes in more evidence versions is flagged
	// oversized (counted, logged, alerted on, carried in its record); it closes as
	// usual. nil means DefaultOversizedVersions; 0 never flags.
	OversizedVersions *int

	// Codecs decode the input records and encode the closed windows and dead letters
	// (package schemas: Avro, single-object or Confluent wire format).
	Codecs *schemas.Codecs
	// DeadLetters parks undecodable input synchronously. Default: a Goka emitter on
	// DeadLetterTopic built with Emitter.
	DeadLetters DeadLetterWriter
	// Emitter carries the broker plumbing of the default DeadLetters
	// (kafka.Goka.EmitterOptions).
	Emitter []goka.EmitterOption

	Clock    func() time.Time // default time.Now
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// CheckTopicsOnly (kafka.manageTopics false): the version's geometry topic must
	// exist and is only checked; otherwise it is created on the version's first start
	// with TopicReplication replicas (default 1).
	CheckTopicsOnly  bool
	TopicReplication int16
	// HotStandby (windows.hotStandby): the instance also keeps the state table
	// partitions of the other instances up to date, and recovers its tables before it
	// joins the group (Goka's hot standby and recover-ahead). A partition it takes over
	// in a rebalance is then read on from its standby copy instead of restored from
	// the table topic (D42). It costs each instance a reader and a local copy of every
	// table partition; with one instance it changes nothing.
	HotStandby bool
	// Goka carries the broker plumbing (sarama config, hasher, storage, tester).
	Goka []goka.ProcessorOption
	// Client carries the franz-go plumbing of the publisher, which reads the group
	// table's changelog and emits the closed records (kafka.NewClientOptions).
	Client []kgo.Opt

	// inlineEmit: closed records are emitted by the close callback (Goka's tester
	// has no changelog for the publisher to read). Tests only.
	inlineEmit bool
	// restartMin and restartMax override restartBackoffMin and restartBackoffMax.
	// Tests only.
	restartMin, restartMax time.Duration
}

// DefaultOversizedVersions is the default Options.OversizedVersions.
const DefaultOversizedVersions = 50_000

// DefaultReemitAfter is the least default Options.ReemitAfter.
const DefaultReemitAfter = time.Minute

// DefaultGroupPrefix starts group names when Options.GroupPrefix is empty.
const DefaultGroupPrefix = "larkline"

// GroupName is the Goka group (and state table prefix) of a processor version under a
// group prefix (empty: DefaultGroupPrefix).
func GroupName(prefix, version string) goka.Group {
	if prefix == "" {
		prefix = DefaultGroupPrefix
	}
	return goka.Group(prefix + "-windows-" + version)
}

// Processor is the window processor of one processor version.
type Processor struct {
	opts Options
	mach machine
	log  *slog.Logger
	m    *metrics
	// proc is the Goka processor of the current run: Run builds a new one for every
	// restart after an outage (a Goka processor runs once), supervise.go.
	proc  atomic.Pointer[goka.Processor]
	gopts []goka.ProcessorOption
	// used: the current proc has been run and cannot run again.
	used  bool
	graph *goka.GroupGraph
	dead  DeadLetterWriter
	// chains links the loop notes of each evidence reader run (chains.go, D28).
	chains *noteChains
	// ownDead is the default dead-letter emitter, finished by Close.
	ownDead *gokaDeadLetters
	life    *lifecycle.State

	wake      chan struct{}
	running   atomic.Bool
	nextDueMu sync.Mutex
	nextDue   int64 // unix ms; 0 none

	scanMu sync.Mutex
	scan   scanTotals

	failedMu sync.Mutex
	failed   error // the first error a callback failed the current run with

	// waiting is why Run is waiting to restart the Goka processor (an outage), nil
	// while it runs; Ready reports it.
	waiting atomic.Pointer[error]
	// restartMin and restartMax bound the backoff between restarts (tests shorten them).
	restartMin, restartMax time.Duration

	// barrier holds windows until their partition's on-time input is applied (D23);
	// nil under Goka's tester, which applies every input before a scan.
	barrier atomic.Pointer[inputBarrier]
}

// scanMeta is the visit's meta: the scan's clock and the safe time of every evidence
// partition (barrier.go).
type scanMeta struct {
	now time.Time
	// safe: unix ms by evidence partition; a partition not in it has none yet. nil:
	// no barrier, every partition is safe at now.
	safe map[int32]int64
}

// safeOf is the safe time of partition p.
func (m *scanMeta) safeOf(p int32) int64 {
	if m.safe == nil {
		return m.now.UnixMilli()
	}
	return m.safe[p]
}

// scanTotals accumulates one visit over the state.
type scanTotals struct {
	open       int
	closing    int
	held       int // windows held by the evidence barrier
	inputHeld  int // windows held by the input barrier (D23)
	oversized  int
	oldestSeen int64
	nextDue    int64
}

// ErrInvalidOptions wraps every option problem reported by New.
var ErrInvalidOptions = errors.New("windows: invalid options")

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("windows: processor closed")

// ErrAlreadyRunning is returned (wrapped) by Run while another Run is active.
var ErrAlreadyRunning = lifecycle.ErrAlreadyRunning

// New validates the options and builds the processor; nothing connects until Run.
func New(o Options) (*Processor, error) {
	bad := o.problems()
	if o.Codecs == nil {
		bad.Add("Codecs", nil, "are required")
	}
	if len(o.Client) == 0 && !o.inlineEmit {
		bad.Add("Client", nil, "options are required (the publisher reads the table changelog)")
	}
	if err := bad.Err(ErrInvalidOptions); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.ReemitAfter = cmp.Or(o.ReemitAfter, max(o.ScanInterval, DefaultReemitAfter))
	if o.OversizedVersions == nil {
		o.OversizedVersions = new(DefaultOversizedVersions)
	}
	p := &Processor{
		life: lifecycle.New("window processor", lifecycle.OneAtATime, ErrClosed),
		opts: o,
		mach: newMachine(o),
		log:  o.Logger.With("component", string(ids.StageWindows), "processor_version", o.ProcessorVersion),
		m:    newMetrics(o.Registry),
		wake: make(chan struct{}, 1),
		dead: o.DeadLetters,
		// one per Processor: a restart reads its partitions again from their commits,
		// which the chains see as offsets going backwards (a new run, D28)
		chains: newNoteChains(nil),
	}
	edges := []goka.Edge{
		goka.Input(goka.Stream(o.EvidenceTopic), new(codec.Bytes), p.onEvidence),
		goka.Input(goka.Stream(o.ClosedTopic), new(codec.Bytes), p.onClosed),
		goka.Loop(loopCodec{}, p.onLoop),
		goka.Visitor(visitClose, p.onVisit),
		goka.Output(goka.Stream(o.ClosedTopic), new(codec.Bytes)),
		goka.Persist(tableCodec{}),
	}
	if o.RequireCoverage {
		edges = append(edges, goka.Input(goka.Stream(o.CheckpointTopic), new(codec.Bytes), p.onCheckpoint))
	}
	p.graph = goka.DefineGroup(GroupName(o.GroupPrefix, o.ProcessorVersion), edges...)
	p.gopts = append(append([]goka.ProcessorOption{
		goka.WithNilHandling(goka.NilProcess),
		goka.WithLogger(GokaLogger(o.Logger)),
	}, o.Goka...), goka.WithRebalanceCallback(p.onRebalance))
	if o.HotStandby {
		p.gopts = append(p.gopts, goka.WithHotStandby(), goka.WithRecoverAhead())
	}
	p.restartMin, p.restartMax = cmp.Or(o.restartMin, restartBackoffMin), cmp.Or(o.restartMax, restartBackoffMax)
	for _, r := range []string{RestartBroker, RestartCoordinator, RestartRegistry} {
		p.m.restarts.WithLabelValues(r)
	}
	if err := p.newGoka(); err != nil {
		return nil, err
	}
	if p.dead == nil {
		d, err := newGokaDeadLetters(o.Brokers, o.DeadLetterTopic, o.Emitter)
		if err != nil {
			return nil, err
		}
		p.dead, p.ownDead = d, d
	}
	return p, nil
}

// Check reports every value of o that breaks the processor's rules, as an
// *options.Error naming the fields, or nil. It ignores the dependencies (Codecs,
// Client), which New checks too. The configuration layer calls it to report a
// wrong key before anything starts.
func (o Options) Check() error {
	p := o.problems()
	return p.Err(ErrInvalidOptions)
}

func (o Options) problems() *options.Problems {
	p := new(options.Problems)
	if _, err := ids.ParseProcessorVersion(o.ProcessorVersion); err != nil {
		p.Add("ProcessorVersion", o.ProcessorVersion, "%v", err)
	}
	for _, t := range []struct{ field, name string }{
		{"EvidenceTopic", o.EvidenceTopic}, {"ClosedTopic", o.ClosedTopic}, {"DeadLetterTopic", o.DeadLetterTopic},
	} {
		if t.name == "" {
			p.Add(t.field, nil, "is required")
		}
	}
	if o.RequireCoverage && o.CheckpointTopic == "" {
		p.Add("CheckpointTopic", o.CheckpointTopic, "is required with RequireCoverage (coverage reads the checkpoints)")
	}
	windowOK := false
	switch {
	case o.Window < time.Minute:
		p.Add("Window", o.Window, "must be at least 1m")
	case time.Hour%o.Window != 0:
		p.Add("Window", o.Window, "must divide an hour evenly (such as 5m, 10m, 15m, 20m or 30m) so windows align to UTC hours")
	default:
		windowOK = true
	}
	switch {
	case o.Grace < 0:
		p.Add("Grace", o.Grace, "must not be negative")
	case windowOK && o.Grace >= o.Window:
		p.Add("Grace", o.Grace, "must be shorter than the window (%s)", o.Window)
	}
	if o.Retention < o.Window {
		p.Add("Retention", o.Retention, "must be at least one window (%s)", o.Window)
	}
	if o.ScanInterval <= 0 {
		p.Add("ScanInterval", o.ScanInterval, "must be positive")
	}
	if o.ReemitAfter < 0 {
		p.Add("ReemitAfter", o.ReemitAfter, "must not be negative")
	}
	if o.OversizedVersions != nil && *o.OversizedVersions < 0 {
		p.Add("OversizedVersions", *o.OversizedVersions, "must not be negative (0: never flag)")
	}
	return p
}

const visitClose = "close-due"

// inputRescan is how soon the watcher scans again while the input barrier holds
// windows (Goka commits its marks every second).
const inputRescan = time.Second

// scanTimeout bounds one watcher pass over the state.
const scanTimeout = 2 * time.Minute

// onRebalance starts new note runs for every partition at each new assignment
// (D28, D41): every partition of the new session is read again from its commit, and
// one this process read before may have been another member's meanwhile, whose notes
// moved its chats' chains on: this process's next note there must start a run, or
// each chat refuses it as overtaken, for good.
func (p *Processor) onRebalance(goka.Assignment) { p.chains.reset() }

// newGoka builds the Goka processor of the next run.
func (p *Processor) newGoka() error {
	proc, err := goka.NewProcessor(p.opts.Brokers, p.graph, p.gopts...)
	if err != nil {
		return fmt.Errorf("windows: creating goka processor %s: %w", GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion), err)
	}
	p.proc.Store(proc)
	p.used = false
	p.chains.reset()
	return nil
}

// runOnce runs one Goka processor (built by New or by the restart before) until ctx
// ends or it fails, with the watcher and the publisher beside it. It returns after
// the Goka processor has drained and committed.
func (p *Processor) runOnce(ctx context.Context, cl *kgo.Client) error {
	if p.used {
		if err := p.newGoka(); err != nil {
			return err
		}
	}
	p.used = true
	proc := p.proc.Load()
	p.failedMu.Lock()
	p.failed = nil
	p.failedMu.Unlock()
	// The watcher stops (and its scan finishes) before Goka is told to stop: Goka's
	// VisitAll races with its own shutdown when a visit is abandoned midway.
	if cl != nil {
		group := GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion)
		if err := p.checkGeometry(ctx, cl); err != nil {
			return err
		}
		p.barrier.Store(newInputBarrier(kadmOffsets{adm: kadm.NewClient(cl), group: string(group)},
			p.opts.EvidenceTopic, string(p.graph.LoopStream().Topic())))
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	gokaCtx, stopGoka := context.WithCancel(context.WithoutCancel(ctx))
	defer stopGoka()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); p.reportRecovery(watchCtx) }()
		p.watch(watchCtx)
		wg.Wait()
	}()
	go func() {
		<-watchCtx.Done()
		<-watched
		stopGoka()
	}()
	// The publisher emits the closed records from the table's changelog once Goka
	// has created and recovered the table; it stops after Goka.
	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	published := make(chan error, 1)
	go func() {
		if p.opts.inlineEmit {
			published <- nil
			return
		}
		if err := proc.WaitForReadyContext(pubCtx); err != nil {
			published <- nil // stopped before it was ready
			return
		}
		err := p.runPublisher(pubCtx)
		if err != nil {
			// No publisher, no closed records: stop the processor rather than run
			// without one.
			p.log.Error("closed-record publisher failed; stopping the window processor", "err", err)
			stopWatch()
		}
		published <- err
	}()
	p.waiting.Store(nil)
	err := proc.Run(gokaCtx)
	stopWatch()
	<-watched
	stopPub()
	if perr := <-published; perr != nil && err == nil {
		err = perr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		p.failedMu.Lock()
		cause := p.failed
		p.failedMu.Unlock()
		if cause != nil {
			return fmt.Errorf("windows: processor %s: %w (goka: %w)", GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion), cause, err)
		}
		return fmt.Errorf("windows: processor %s: %w", GroupName(p.opts.GroupPrefix, p.opts.ProcessorVersion), err)
	}
	return nil
}

// Close stops a running Run, waits for it to drain and commit, and releases the
// default dead-letter emitter. It is safe to call more than once.
func (p *Processor) Close() error {
	if !p.life.Close() {
		return nil
	}
	if p.ownDead != nil {
		return p.ownDead.Close()
	}
	return nil
}

// Recovered reports whether the state table is recovered and the processor runs.
func (p *Processor) Recovered() bool { return p.waiting.Load() == nil && p.proc.Load().Recovered() }

// Goka exposes the underlying processor of the current run for readiness and stats.
func (p *Processor) Goka() *goka.Processor { return p.proc.Load() }

// Wakeup asks the watcher to scan now. It never blocks: a wakeup while one is pending
// is coalesced, and one while the watcher is not running is dropped (the periodic scan
// finds the windows anyway).
func (p *Processor) Wakeup() {
	if !p.running.Load() {
		p.m.wakeups.WithLabelValues("dropped").Inc()
		return
	}
	select {
	case p.wake <- struct{}{}:
		p.m.wakeups.WithLabelValues("sent").Inc()
	default:
		p.m.wakeups.WithLabelValues("coalesced").Inc()
	}
}

// noteDue lets a callback tell the watcher that a window becomes due at t (unix ms).
// A window already due on the wall clock wakes nothing: it was opened or kept by
// input the processor reads behind the wall clock (a restart, a replay, a burst),
// and the periodic scan closes it once the input barrier passes (D23). Waking the
// scan at once would only visit every key per newly opened window.
func (p *Processor) noteDue(t int64) {
	if t <= 0 || t <= p.opts.Clock().UnixMilli() {
		return
	}
	p.nextDueMu.Lock()
	earlier := p.nextDue == 0 || t < p.nextDue
	if earlier {
		p.nextDue = t
	}
	p.nextDueMu.Unlock()
	if earlier {
		p.Wakeup()
	}
}

func (p *Processor) watch(ctx context.Context) {
	p.running.Store(true)
	defer p.running.Store(false)
	timer := time.NewTimer(p.opts.ScanInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.wake:
			// a due time may have moved earlier: re-arm and scan only once it passed
			if d := p.untilNextDue(); d > 0 {
				resetTimer(timer, min(d, p.opts.ScanInterval))
				continue
			}
		}
		// A started scan runs to its end even when shutdown begins (Goka's VisitAll is
		// not safe to abandon midway); it is bounded by scanTimeout instead.
		scanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scanTimeout)
		err := p.ScanOnce(scanCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			p.log.Warn("window scan failed; retrying at the next interval", "err", err)
		}
		wait := p.opts.ScanInterval
		if d := p.untilNextDue(); d > 0 && d < wait {
			wait = d
		}
		resetTimer(timer, wait)
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}

func (p *Processor) untilNextDue() time.Duration {
	p.nextDueMu.Lock()
	defer p.nextDueMu.Unlock()
	if p.nextDue == 0 {
		return 0
	}
	return time.UnixMilli(p.nextDue).Sub(p.opts.Clock())
}

// ScanOnce visits every key of the assigned partitions once and closes every due
// window. The watcher calls it; tests call it with a controlled clock.
func (p *Processor) ScanOnce(ctx context.Context) error {
	now := p.opts.Clock()
	p.scanMu.Lock()
	p.scan = scanTotals{}
	p.scanMu.Unlock()
	p.nextDueMu.Lock()
	p.nextDue = 0
	p.nextDueMu.Unlock()
	meta := &scanMeta{now: now}
	if b := p.barrier.Load(); b != nil {
		safe, err := b.advance(ctx, now.UnixMilli())
		if err != nil {
			// the safe times of earlier rounds still hold; they only stop moving
			p.log.Warn("input barrier not advanced; windows wait for it", "err", err)
		}
		meta.safe = safe
	}
	began := time.Now()
	visited, err := p.proc.Load().VisitAllWithStats(ctx, visitClose, meta)
	p.m.scanSeconds.Observe(time.Since(began).Seconds())
	if err != nil {
		return fmt.Errorf("visiting window state: %w", err)
	}
	p.scanMu.Lock()
	s := p.scan
	p.scanMu.Unlock()
	p.m.openWindows.Set(float64(s.open))
	p.m.closingWindows.Set(float64(s.closing))
	p.m.oversizedOpen.Set(float64(s.oversized))
	p.m.barrierHeld.Set(float64(s.held))
	p.m.inputHeld.Set(float64(s.inputHeld))
	if s.oldestSeen > 0 {
		p.m.oldestUncovered.Set(now.Sub(time.UnixMilli(s.oldestSeen)).Seconds())
	} else {
		p.m.oldestUncovered.Set(0)
	}
	if s.nextDue > 0 {
		p.nextDueMu.Lock()
		if p.nextDue == 0 || s.nextDue < p.nextDue {
			p.nextDue = s.nextDue
		}
		p.nextDueMu.Unlock()
	}
	if s.inputHeld > 0 {
		// windows wait for the input barrier, which moves with the group's commits:
		// look again soon rather than a whole scan interval later
		again := now.Add(inputRescan).UnixMilli()
		p.nextDueMu.Lock()
		if p.nextDue <= now.UnixMilli() || p.nextDue > again {
			p.nextDue = again
		}
		p.nextDueMu.Unlock()
	}
	p.m.visitedKeys.Set(float64(visited))
	return nil
}

// recoveryReportInterval is how often table recovery progress is exported.
const recoveryReportInterval = 5 * time.Second

// reportRecovery exports, until ctx ends, how many of this instance's table partitions
// are in each state and how many table records the recovering ones still have to
// read: the progress of a restart or of a replay's first start.
func (p *Processor) reportRecovery(ctx context.Context) {
	tick := time.NewTicker(recoveryReportInterval)
	defer tick.Stop()
	for {
		states := map[string]int{}
		var remaining int64
		if stats := p.proc.Load().StatsWithContext(ctx); stats != nil {
			for _, part := range stats.Group {
				if part == nil || part.TableStats == nil {
					continue
				}
				ts := part.TableStats
				if ts.RunMode != gokaActive && ts.Status == goka.PartitionRunning {
					states["standby"]++ // a hot standby copy, kept up to date (D42)
					continue
				}
				states[partitionState(ts.Status)]++
				if ts.Status < goka.PartitionRunning && ts.Recovery != nil && ts.Recovery.Hwm > ts.Recovery.Offset {
					remaining += ts.Recovery.Hwm - ts.Recovery.Offset
				}
			}
		}
		for _, st := range []string{"stopped", "initializing", "connecting", "recovering", "preparing", "running", "standby"} {
			p.m.tablePartitions.WithLabelValues(st).Set(float64(states[st]))
		}
		p.m.recoveryRemaining.Set(float64(remaining))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// gokaActive is Goka's run mode of a partition this instance processes (its
// unexported runModeActive, the zero value); a hot standby copy runs passive.
const gokaActive goka.PPRunMode = 0

func partitionState(s goka.PartitionStatus) string {
	switch s {
	case goka.PartitionStopped:
		return "stopped"
	case goka.PartitionInitializing:
		return "initializing"
	case goka.PartitionConnecting:
		return "connecting"
	case goka.PartitionRecovering:
		return "recovering"
	case goka.PartitionPreparing:
		return "preparing"
	}
	return "running"
}
