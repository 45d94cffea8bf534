package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/windows"
	"github.com/larkline/larkline/schemas/ids"
)

// versionsSubs are the subcommands of the versions noun.
var versionsSubs = []string{"list", "start", "diff", "promote", "retire"}

// runVersions is the versions noun, list, start, diff, promote and retire (decisions D26):
// processor versions side by side, compared, promoted and cleaned up. Every command
// run twice changes nothing the second time.
func runVersions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("versions", versionsSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("versions "+sub, stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	v := versionsFlags{}
	switch sub {
	case "start":
		v.fromBeginning = fs.Bool("from-beginning", false, "read the evidence topic from its start (the default)")
		v.fromTime = fs.String("from-time", "", "read the evidence topic from this RFC 3339 time on; windows before it are not rebuilt")
		v.window = fs.Duration("window", 0, "the version's window length (default: the configured synthesisWindow)")
		v.grace = fs.Duration("grace", -1, "the version's close grace (default: the configured synthesisWindowCloseGrace)")
		v.wait = fs.Bool("wait", true, "print progress until the version has caught up with the evidence topic")
		v.every = fs.Duration("progress", 10*time.Second, "how often to print progress")
		v.synthesisOnly = fs.Bool("synthesis-only", false, "run no window processor: synthesize the serving version's closed windows again, under the version's own synthesis settings (a prompt or model change: see --synthesizer, --model, --prompt-version)")
		v.synth = addSynthesisFlags(fs)
	case "diff":
		v.workspace = fs.String("workspace", "", "compare one workspace (default: every workspace)")
		v.details = fs.Bool("details", false, "list the differing entries and windows, not only their counts")
	case "promote", "retire":
		v.dryRun = fs.Bool("dry-run", false, "print what would change and change nothing")
		if sub == "retire" {
			v.timeout = fs.Duration("timeout", 2*time.Minute, "how long to wait for the running processes to stop the version before deleting its consumer groups")
		}
	}
	names, err := parseVersionArgs(fs, args)
	if err != nil {
		return err
	}
	if v.synth != nil {
		v.synth.given(fs)
	}
	want := map[string]int{"list": 0, "start": 1, "promote": 1, "retire": 1, "diff": 2}[sub]
	if len(names) != want {
		return fmt.Errorf("%w: versions %s takes %d version name(s), got %d", errUsage, sub, want, len(names))
	}
	for _, n := range names {
		if _, err := ids.ParseProcessorVersion(n); err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
	}
	cfg, st, closeStore, err := openStoreCommand(ctx, *path)
	if err != nil {
		return err
	}
	defer closeStore()
	c := &versionsCmd{cfg: cfg, st: st, out: stdout, json: *asJSON, f: v}
	if sub != "diff" {
		cl, err := newKafkaClient(cfg, "versions")
		if err != nil {
			return err
		}
		defer cl.Close()
		c.cl, c.adm = cl, kadm.NewClient(cl)
	}
	switch sub {
	case "list":
		return c.list(ctx)
	case "start":
		return c.start(ctx, names[0])
	case "diff":
		return c.diff(ctx, names[0], names[1])
	case "promote":
		return c.promote(ctx, names[0])
	default:
		return c.retire(ctx, names[0])
	}
}

// parseVersionArgs parses flags wherever they stand among the version names
// (`versions start v2 --from-time T` and `versions start --from-time T v2`).
func parseVersionArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			return names, nil
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

type versionsFlags struct {
	fromBeginning, wait, details, dryRun, synthesisOnly *bool
	fromTime, workspace                                 *string
	window, grace, every, timeout                       *time.Duration
	synth                                               *synthesisFlags
}

type versionsCmd struct {
	cfg  *config.Config
	st   *store.Store
	cl   *kgo.Client
	adm  *kadm.Client
	out  io.Writer
	json bool
	f    versionsFlags
}

// versionJSON is one version in `versions list --json`.
type versionJSON struct {
	Name          string     `json:"name"`
	State         string     `json:"state"`
	WindowSeconds int64      `json:"window_seconds,omitempty"`
	GraceSeconds  int64      `json:"grace_seconds,omitempty"`
	CodeVersion   string     `json:"code_version,omitempty"`
	Groups        []string   `json:"groups"`
	Topics        []string   `json:"topics"`
	StartFrom     *time.Time `json:"start_from,omitempty"`
	SynthesisOf   string     `json:"synthesis_of,omitempty"`
	// Synthesis is the version's own synthesis settings (no endpoint, no key); absent
	// when it synthesizes with the deployment's configuration.
	Synthesis     *synthesisJSON `json:"synthesis,omitempty"`
	SynthesisHash string         `json:"synthesis_hash,omitempty"`
	describe      string         // the synthesis as the text list shows it
	CreatedAt     time.Time      `json:"created_at"`
	PromotedAt    *time.Time     `json:"promoted_at,omitempty"`
	RetiredAt     *time.Time     `json:"retired_at,omitempty"`
	// LagRecords and LagSeconds are the version's windows group's lag on the evidence
	// topic; -1 when unknown (the group has not started, or is retired).
	LagRecords         int64      `json:"lag_records"`
	LagSeconds         float64    `json:"lag_seconds"`
	CaughtUp           bool       `json:"caught_up"`
	WindowsClosed      int64      `json:"windows_closed"`
	WindowsSynthesized int64      `json:"windows_synthesized"`
	WindowsFailed      int64      `json:"windows_failed"`
	FirstWindow        *time.Time `json:"first_window,omitempty"`
	LastWindow         *time.Time `json:"last_window,omitempty"`
}

// groupsAndTopics are what a version owns in Kafka: as recorded, or (a version the
// migration registered before it ran) as the configuration names them.
func (c *versionsCmd) groupsAndTopics(v store.ProcessorVersion) ([]string, []string) {
	if len(v.Groups) > 0 || v.SynthesisOf != "" {
		return v.Groups, v.Topics
	}
	s := versionSpec(c.cfg.Kafka.GroupPrefix, v.Name, time.Minute, 0, nil)
	return s.Groups, s.Topics
}

// evidenceLag is a windows group's lag on the evidence topic: records behind, the
// age of the oldest unread record, how many it consumed, and whether it committed
// any offset (it started).
type evidenceLag struct {
	records, consumed int64
	age               time.Duration
	committed         bool
}

func (c *versionsCmd) lag(ctx context.Context, version string, measureAge bool) (evidenceLag, error) {
	group := string(windows.GroupName(c.cfg.Kafka.GroupPrefix, version))
	o := kafka.LagOptions{MaxTimestampFetches: new(0)} // no ages
	if measureAge {
		o.MaxTimestampFetches = nil // the default
	}
	lags, err := kafka.Lag(ctx, c.cl, []string{group}, o)
	if err != nil {
		return evidenceLag{}, err
	}
	var l evidenceLag
	for _, g := range lags {
		if g.Err != nil {
			return evidenceLag{}, g.Err
		}
		for _, p := range g.Partitions {
			if p.Topic != c.cfg.Kafka.Topics.Evidence {
				continue
			}
			l.records += max(p.Lag, 0)
			l.consumed += max(p.Committed, 0)
			if p.Committed >= 0 {
				l.committed = true // a partition without records never gets a commit
			}
			if p.LagTime > l.age {
				l.age = p.LagTime
			}
		}
	}
	return l, nil
}

func (c *versionsCmd) list(ctx context.Context) error {
	vs, err := c.st.ListVersions(ctx)
	if err != nil {
		return err
	}
	wins, err := c.st.WindowsByVersion(ctx)
	if err != nil {
		return err
	}
	out := make([]versionJSON, 0, len(vs))
	for _, v := range vs {
		groups, topics := c.groupsAndTopics(v)
		j := versionJSON{Name: v.Name, State: string(v.State), WindowSeconds: int64(v.Window / time.Second),
			GraceSeconds: int64(v.Grace / time.Second), CodeVersion: v.CodeVersion, Groups: groups, Topics: topics,
			StartFrom: v.StartFrom, SynthesisOf: v.SynthesisOf, CreatedAt: v.CreatedAt, PromotedAt: v.PromotedAt, RetiredAt: v.RetiredAt,
			LagRecords: -1, LagSeconds: -1, Synthesis: synthesisView(v.Synthesis), describe: describeSynthesis(v.Synthesis)}
		if v.Synthesis != nil {
			j.SynthesisHash = v.Synthesis.Hash()
		}
		if v.State != store.VersionRetired && v.SynthesisOf == "" {
			if l, err := c.lag(ctx, v.Name, true); err == nil && l.committed {
				j.LagRecords, j.LagSeconds, j.CaughtUp = l.records, l.age.Seconds(), l.records == 0
			}
		}
		w := wins[v.Name]
		j.WindowsClosed, j.WindowsSynthesized, j.WindowsFailed = w.Closed, w.Synthesized, w.Failed
		if !w.First.IsZero() {
			j.FirstWindow, j.LastWindow = &w.First, &w.Last
		}
		out = append(out, j)
	}
	if c.json {
		return printJSON(c.out, out)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSTATE\tWINDOW\tGRACE\tLAG\tLAG AGE\tCLOSED\tSYNTHESIZED\tFAILED\tFIRST WINDOW\tLAST WINDOW\tCREATED\tCODE")
	for _, j := range out {
		lag, age := "-", "-"
		if j.LagRecords >= 0 {
			lag, age = fmt.Sprint(j.LagRecords), (time.Duration(j.LagSeconds * float64(time.Second))).Round(time.Second).String()
			if j.CaughtUp {
				lag += " (caught up)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", j.Name, j.State,
			secs(j.WindowSeconds), secs(j.GraceSeconds), lag, age, j.WindowsClosed, j.WindowsSynthesized, j.WindowsFailed,
			timeOrDash(j.FirstWindow), timeOrDash(j.LastWindow), j.CreatedAt.Format(time.RFC3339), orDash(j.CodeVersion))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, j := range out {
		if j.SynthesisOf != "" {
			fmt.Fprintf(c.out, "%s: synthesis-only, synthesizes the windows of %s; no groups or topics\n", j.Name, j.SynthesisOf)
		} else {
			fmt.Fprintf(c.out, "%s: groups %s; topics %s\n", j.Name, strings.Join(j.Groups, ","), strings.Join(j.Topics, ","))
		}
		fmt.Fprintf(c.out, "%s: synthesis: %s\n", j.Name, j.describe)
	}
	return nil
}

func secs(s int64) string {
	if s == 0 {
		return "-"
	}
	return (time.Duration(s) * time.Second).String()
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// start registers a new candidate version, which the windows role of every running
// process picks up, and follows its progress until it caught up.
func (c *versionsCmd) start(ctx context.Context, name string) error {
	f := c.f
	if *f.fromBeginning && *f.fromTime != "" {
		return fmt.Errorf("%w: --from-beginning and --from-time exclude each other", errUsage)
	}
	var from *time.Time
	if *f.fromTime != "" {
		t, err := time.Parse(time.RFC3339, *f.fromTime)
		if err != nil {
			return fmt.Errorf("%w: --from-time: %w", errUsage, err)
		}
		t = t.UTC()
		from = &t
	}
	l := c.cfg.Services.Workspace.Timeline.Lark
	window, grace := l.SynthesisWindow, l.SynthesisWindowCloseGrace
	if *f.window > 0 {
		window = *f.window
	}
	if *f.grace >= 0 {
		grace = *f.grace
	}
	if v, err := c.st.GetVersion(ctx, name); err == nil {
		return fmt.Errorf("version %s exists (%s since %s): nothing changed; a name is never reused: %w",
			name, v.State, v.CreatedAt.Format(time.RFC3339), store.ErrVersionExists)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	own, err := f.synth.settings(c.cfg)
	if err != nil {
		return err
	}
	if *f.synthesisOnly {
		if from != nil || *f.window > 0 || *f.grace >= 0 {
			return fmt.Errorf("%w: --synthesis-only reuses the serving version's windows: no --from-time, --window or --grace", errUsage)
		}
		return c.startSynthesisOnly(ctx, name, own)
	}
	spec := versionSpec(c.cfg.Kafka.GroupPrefix, name, window, grace, from)
	spec.Synthesis = own
	// A group of this name with offsets ran before the registry (an old replay): its
	// table would not be rebuilt from the start.
	offs, err := c.adm.FetchOffsets(ctx, spec.Groups[0])
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("reading the offsets of group %s: %w", spec.Groups[0], err)
	}
	if err == nil && len(offs.Offsets()) > 0 {
		return fmt.Errorf("group %s already has committed offsets (a version %s ran before the registry): choose another name: %w",
			spec.Groups[0], name, store.ErrVersionExists)
	}
	if from != nil {
		listed, err := c.adm.ListOffsetsAfterMilli(ctx, from.UnixMilli(), c.cfg.Kafka.Topics.Evidence)
		if err != nil {
			return fmt.Errorf("listing the evidence offsets at %s: %w", from.Format(time.RFC3339), err)
		}
		if err := listed.Error(); err != nil {
			return fmt.Errorf("listing the evidence offsets at %s: %w", from.Format(time.RFC3339), err)
		}
		resp, err := c.adm.CommitOffsets(ctx, spec.Groups[0], listed.Offsets())
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return fmt.Errorf("committing group %s at %s: %w", spec.Groups[0], from.Format(time.RFC3339), err)
		}
	}
	v, err := c.st.RegisterVersion(ctx, spec)
	if err != nil {
		return err
	}
	origin := "the start of " + c.cfg.Kafka.Topics.Evidence
	if from != nil {
		origin = c.cfg.Kafka.Topics.Evidence + " at " + from.Format(time.RFC3339) + " (windows before it are not rebuilt)"
	}
	if c.json {
		if err := printJSON(c.out, map[string]any{"event": "started", "version": v.Name, "state": v.State,
			"window_seconds": int64(window / time.Second), "grace_seconds": int64(grace / time.Second),
			"groups": v.Groups, "topics": v.Topics, "from": origin, "synthesis": synthesisView(v.Synthesis)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.out, "started %s as a candidate: window %s, grace %s, from %s; group %s\n",
			name, window, grace, origin, v.Groups[0])
		fmt.Fprintf(c.out, "the windows role of the running processes picks it up within %s; users keep seeing the serving version\n", versionsPollInterval)
		fmt.Fprintf(c.out, "synthesis: %s\n", describeSynthesis(v.Synthesis))
	}
	if !*f.wait {
		return nil
	}
	return c.follow(ctx, name)
}

// follow prints the version's progress on the evidence topic until it caught up.
func (c *versionsCmd) follow(ctx context.Context, name string) error {
	var m progressMeter
	return c.poll(ctx, func() (bool, error) {
		l, err := c.lag(ctx, name, false)
		now := time.Now()
		if err != nil || !l.committed {
			msg := "waiting for a windows role to pick it up"
			if err != nil {
				msg = "progress unavailable: " + err.Error()
			}
			if c.json {
				_ = printJSON(c.out, map[string]any{"event": "waiting", "version": name, "detail": msg})
			} else {
				fmt.Fprintf(c.out, "%s %s: %s\n", now.UTC().Format(time.RFC3339), name, msg)
			}
			return false, nil
		}
		rate, eta := m.observe(now, l.consumed, l.records)
		if c.json {
			_ = printJSON(c.out, map[string]any{"event": "progress", "version": name, "behind": l.records,
				"consumed": l.consumed, "records_per_second": rate, "eta": eta})
		} else {
			fmt.Fprintf(c.out, "%s %s: %d evidence records behind, %d consumed, %.1f records/s, ETA %s\n",
				now.UTC().Format(time.RFC3339), name, l.records, l.consumed, rate, eta)
		}
		if l.records == 0 {
			serving, _ := c.st.ServingVersion(ctx)
			if c.json {
				return true, printJSON(c.out, map[string]any{"event": "caught_up", "version": name})
			}
			fmt.Fprintf(c.out, "caught up: %s runs live next to %s; compare with `larkline versions diff %s %s`, then `larkline versions promote %s`\n",
				name, serving, serving, name, name)
			return true, nil
		}
		return false, nil
	})
}

// startSynthesisOnly registers a synthesis-only version of the serving one and follows
// its windows until it synthesized every window the serving version had closed.
func (c *versionsCmd) startSynthesisOnly(ctx context.Context, name string, own *store.VersionSynthesis) error {
	servingName, err := c.st.ServingVersion(ctx)
	if err != nil {
		return err
	}
	serving, err := c.st.GetVersion(ctx, servingName)
	if err != nil {
		return err
	}
	window, grace := serving.Window, serving.Grace
	if window == 0 {
		l := c.cfg.Services.Workspace.Timeline.Lark
		window, grace = l.SynthesisWindow, l.SynthesisWindowCloseGrace
	}
	v, err := c.st.RegisterVersion(ctx, store.VersionSpec{Name: name, Window: window, Grace: grace,
		CodeVersion: codeVersion(), SynthesisOf: serving.Name, Synthesis: own})
	if err != nil {
		return err
	}
	if c.json {
		if err := printJSON(c.out, map[string]any{"event": "started", "version": v.Name, "state": v.State, "synthesis_of": serving.Name,
			"synthesis": synthesisView(v.Synthesis)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.out, "started %s as a synthesis-only candidate of %s: the windows role seeds it %s's closed windows within %s, the synthesis workers synthesize them with %s's synthesis: %s\n",
			name, serving.Name, serving.Name, versionsPollInterval, name, describeSynthesis(v.Synthesis))
	}
	if !*c.f.wait {
		return nil
	}
	var m progressMeter
	return c.poll(ctx, func() (bool, error) {
		wins, err := c.st.WindowsByVersion(ctx)
		if err != nil {
			fmt.Fprintf(c.out, "progress unavailable: %v\n", err)
			return false, nil
		}
		src, own := wins[serving.Name], wins[name]
		now := time.Now()
		left := src.Synthesized - own.Synthesized
		rate, eta := m.observe(now, own.Synthesized, left)
		if c.json {
			_ = printJSON(c.out, map[string]any{"event": "progress", "version": name, "windows": own.Closed,
				"synthesized": own.Synthesized, "of": src.Synthesized, "windows_per_second": rate, "eta": eta})
		} else {
			fmt.Fprintf(c.out, "%s %s: %d of %s's %d windows synthesized, %.1f windows/s, ETA %s\n",
				now.UTC().Format(time.RFC3339), name, own.Synthesized, serving.Name, src.Synthesized, rate, eta)
		}
		if own.Closed > 0 && left <= 0 && own.Synthesized+own.Failed == own.Closed {
			if c.json {
				return true, printJSON(c.out, map[string]any{"event": "caught_up", "version": name})
			}
			fmt.Fprintf(c.out, "caught up: %s synthesized %s's windows; compare with `larkline versions diff %s %s`, then `larkline versions promote %s`\n",
				name, serving.Name, serving.Name, name, name)
			return true, nil
		}
		return false, nil
	})
}

// poll calls step every --every until step reports done or fails, or ctx ends (not
// an error: the operator stopped following).
func (c *versionsCmd) poll(ctx context.Context, step func() (done bool, err error)) error {
	t := time.NewTicker(*c.f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if done, err := step(); done || err != nil {
			return err
		}
	}
}

// progressMeter turns successive done counts into a rate per second and an ETA for
// what is left.
type progressMeter struct {
	last   int64
	lastAt time.Time
	rate   float64
}

func (m *progressMeter) observe(now time.Time, done, left int64) (float64, string) {
	if !m.lastAt.IsZero() && now.After(m.lastAt) {
		m.rate = float64(done-m.last) / now.Sub(m.lastAt).Seconds()
	}
	m.last, m.lastAt = done, now
	switch {
	case left <= 0:
		return m.rate, "0s"
	case m.rate > 0:
		return m.rate, (time.Duration(float64(left) / m.rate * float64(time.Second))).Round(time.Second).String()
	}
	return m.rate, "unknown"
}

// diffJSON is one workspace in `versions diff --json`.
type diffJSON struct {
	Workspace      string               `json:"workspace"`
	OnlyA          int                  `json:"only_a"`
	OnlyB          int                  `json:"only_b"`
	Changed        int                  `json:"changed"`
	SummaryChanged bool                 `json:"summary_changed"`
	WindowsOnlyA   int                  `json:"windows_only_a"`
	WindowsOnlyB   int                  `json:"windows_only_b"`
	Details        *store.WorkspaceDiff `json:"details,omitempty"`
}

func (c *versionsCmd) diff(ctx context.Context, a, b string) error {
	diffs, err := c.st.DiffVersions(ctx, a, b, ids.WorkspaceID(*c.f.workspace))
	if err != nil {
		return err
	}
	out := make([]diffJSON, 0, len(diffs))
	for i := range diffs {
		d := &diffs[i]
		j := diffJSON{Workspace: string(d.Workspace), OnlyA: len(d.OnlyA), OnlyB: len(d.OnlyB), Changed: len(d.Changed),
			SummaryChanged: d.SummaryChanged, WindowsOnlyA: len(d.WindowsOnlyA), WindowsOnlyB: len(d.WindowsOnlyB)}
		if *c.f.details {
			j.Details = d
		}
		out = append(out, j)
	}
	if c.json {
		return printJSON(c.out, out)
	}
	if len(out) == 0 {
		fmt.Fprintf(c.out, "%s and %s wrote the same entries, summaries and windows\n", a, b)
		return nil
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "WORKSPACE\tONLY %s\tONLY %s\tCHANGED\tSUMMARY\tWINDOWS ONLY %s\tWINDOWS ONLY %s\n", a, b, a, b)
	for _, j := range out {
		sum := "same"
		if j.SummaryChanged {
			sum = "changed"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%d\n", j.Workspace, j.OnlyA, j.OnlyB, j.Changed, sum, j.WindowsOnlyA, j.WindowsOnlyB)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !*c.f.details {
		return nil
	}
	line := func(side string, e store.DiffEntry) {
		fmt.Fprintf(c.out, "  %s entry %d %s %s [%s] %q\n", side, e.ID, e.OccurredAt.Format(time.RFC3339), e.Kind, e.Status, e.Title)
	}
	for _, d := range diffs {
		fmt.Fprintf(c.out, "\n%s:\n", d.Workspace)
		for _, e := range d.OnlyA {
			line("only "+a, e)
		}
		for _, e := range d.OnlyB {
			line("only "+b, e)
		}
		for _, p := range d.Changed {
			line("changed "+a, p[0])
			line("     to "+b, p[1])
		}
		for _, w := range d.WindowsOnlyA {
			fmt.Fprintf(c.out, "  window closed only by %s: %s\n", a, w)
		}
		for _, w := range d.WindowsOnlyB {
			fmt.Fprintf(c.out, "  window closed only by %s: %s\n", b, w)
		}
	}
	return nil
}

func (c *versionsCmd) promote(ctx context.Context, name string) error {
	p, err := c.st.PromoteVersion(ctx, name, *c.f.dryRun)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.out, map[string]any{"from": p.From, "to": p.To, "changed": p.Changed, "dry_run": *c.f.dryRun})
	}
	switch {
	case !p.Changed:
		fmt.Fprintf(c.out, "%s is serving already: nothing changed\n", name)
	case *c.f.dryRun:
		fmt.Fprintf(c.out, "would promote %s: it serves, %s becomes a candidate (roll back with `larkline versions promote %s`)\n", p.To, p.From, p.From)
		diffs, err := c.st.DiffVersions(ctx, p.From, p.To, "")
		if err != nil {
			return err
		}
		var onlyA, onlyB, changed, sums int
		for _, d := range diffs {
			onlyA, onlyB, changed = onlyA+len(d.OnlyA), onlyB+len(d.OnlyB), changed+len(d.Changed)
			if d.SummaryChanged {
				sums++
			}
		}
		fmt.Fprintf(c.out, "users would see: %d entries gone, %d new, %d changed, %d summaries changed, in %d workspaces (details: larkline versions diff %s %s --details)\n",
			onlyA, onlyB, changed, sums, len(diffs), p.From, p.To)
	default:
		fmt.Fprintf(c.out, "promoted %s: it serves now, %s is a candidate (roll back with `larkline versions promote %s`)\n", p.To, p.From, p.From)
	}
	return nil
}

// retire deletes a non-serving version: its rows (one transaction), then, once the
// running processes stopped it, its consumer groups and topics, then its local state
// directory; a last pass deletes rows a late write left.
func (c *versionsCmd) retire(ctx context.Context, name string) error {
	v, err := c.st.GetVersion(ctx, name)
	if err != nil {
		return err
	}
	if v.State == store.VersionServing {
		return fmt.Errorf("version %s: %w: promote another version first", name, store.ErrVersionServing)
	}
	groups, topics := c.groupsAndTopics(v)
	dir := filepath.Join(c.cfg.Windows.StateDir, name)
	existingGroups, existingTopics, err := c.kafkaLeft(ctx, groups, topics)
	if err != nil {
		return err
	}
	_, dirErr := os.Stat(dir)
	hasDir := dirErr == nil
	rows, err := c.st.RetireVersion(ctx, name, *c.f.dryRun)
	if err != nil {
		return err
	}
	report := map[string]any{"version": name, "dry_run": *c.f.dryRun, "entries": rows.Entries, "summaries": rows.Summaries,
		"windows": rows.Windows, "groups": existingGroups, "topics": existingTopics, "state_dir": hasDir}
	verb := "deleted"
	if *c.f.dryRun {
		verb = "would delete"
	}
	nothing := rows.AlreadyRetired && rows.Entries+rows.Summaries+rows.Windows == 0 && len(existingGroups)+len(existingTopics) == 0 && !hasDir
	if !c.json {
		if nothing {
			fmt.Fprintf(c.out, "%s is retired: nothing left to delete\n", name)
			return nil
		}
		fmt.Fprintf(c.out, "%s %d entries, %d summaries, %d window states of %s\n", verb, rows.Entries, rows.Summaries, rows.Windows, name)
	}
	if *c.f.dryRun {
		if c.json {
			return printJSON(c.out, report)
		}
		fmt.Fprintf(c.out, "would delete groups [%s], topics [%s]", strings.Join(existingGroups, " "), strings.Join(existingTopics, " "))
		if hasDir {
			fmt.Fprintf(c.out, ", state directory %s", dir)
		}
		fmt.Fprintln(c.out)
		return nil
	}
	if err := c.deleteGroups(ctx, existingGroups); err != nil {
		return err
	}
	if len(existingTopics) > 0 {
		resp, err := c.adm.DeleteTopics(ctx, existingTopics...)
		if err != nil {
			return fmt.Errorf("deleting the topics of %s: %w", name, err)
		}
		for _, r := range resp.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("deleting topic %s: %w", r.Topic, r.Err)
			}
		}
		if err := c.waitTopicsGone(ctx, existingTopics); err != nil {
			return err
		}
	}
	if hasDir {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing the state directory of %s: %w", name, err)
		}
	}
	late, err := c.st.RetireVersion(ctx, name, false)
	if err != nil {
		return err
	}
	report["late_rows"] = late.Entries + late.Summaries + late.Windows
	if c.json {
		return printJSON(c.out, report)
	}
	fmt.Fprintf(c.out, "deleted groups [%s], topics [%s]", strings.Join(existingGroups, " "), strings.Join(existingTopics, " "))
	if hasDir {
		fmt.Fprintf(c.out, ", state directory %s", dir)
	}
	fmt.Fprintf(c.out, "\nretired %s\n", name)
	return nil
}

// kafkaLeft returns which of the version's groups and topics exist.
func (c *versionsCmd) kafkaLeft(ctx context.Context, groups, topics []string) ([]string, []string, error) {
	var gs, ts []string
	if len(groups) > 0 {
		listed, err := c.adm.ListGroups(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("listing consumer groups: %w", err)
		}
		for _, g := range groups {
			if _, ok := listed[g]; ok {
				gs = append(gs, g)
			}
		}
	}
	if len(topics) == 0 {
		return gs, nil, nil
	}
	md, err := c.adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing topics: %w", err)
	}
	for _, t := range topics {
		if d, ok := md[t]; ok && d.Err == nil {
			ts = append(ts, t)
		}
	}
	return gs, ts, nil
}

// waitTopicsGone waits until the broker's metadata no longer lists the topics: a
// broker answers a topic deletion once the controller accepted it, and its metadata
// may list the topic a moment longer, so a retire that returned at once could be
// followed by a list, or a second retire, that still finds them. It asks the
// broker each time (kadm's ListTopics may answer from the client's cache).
func (c *versionsCmd) waitTopicsGone(ctx context.Context, topics []string) error {
	deadline := time.Now().Add(*c.f.timeout)
	for {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, c.cl)
		if err != nil {
			return fmt.Errorf("checking that the deleted topics are gone: %w", err)
		}
		var left []string
		for _, t := range resp.Topics {
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			switch err := kerr.ErrorForCode(t.ErrorCode); {
			case errors.Is(err, kerr.UnknownTopicOrPartition):
			case err == nil || kerr.IsRetriable(err):
				left = append(left, name)
			default:
				return fmt.Errorf("checking that topic %s is gone: %w", name, err)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topics %s are still listed %s after their deletion was accepted; run retire again to check",
				strings.Join(left, ", "), *c.f.timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deleteGroups deletes the groups once they have no members: the windows role of
// the running processes stops a retired version within versionsPollInterval.
func (c *versionsCmd) deleteGroups(ctx context.Context, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	deadline := time.Now().Add(*c.f.timeout)
	for {
		resp, err := c.adm.DeleteGroups(ctx, groups...)
		if err != nil {
			return fmt.Errorf("deleting consumer groups: %w", err)
		}
		var busy []string
		for _, r := range resp.Sorted() {
			switch {
			case r.Err == nil, errors.Is(r.Err, kerr.GroupIDNotFound):
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				busy = append(busy, r.Group)
			default:
				return fmt.Errorf("deleting consumer group %s: %w", r.Group, r.Err)
			}
		}
		if len(busy) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("consumer groups %s still have members after %s: is a process running an older larkline, or the version from windows.processorVersion? Its rows are deleted; run retire again once it stopped",
				strings.Join(busy, ", "), *c.f.timeout)
		}
		groups = busy
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// openStoreCommand is the store of a one-shot command: the configuration with
// postgres.dsn, a pool and a schema check. Call closeStore when done.
func openStoreCommand(ctx context.Context, path string) (cfg *config.Config, st *store.Store, closeStore func(), err error) {
	if cfg, err = loadConfig(path, "postgres.dsn"); err != nil {
		return nil, nil, nil, err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := store.CheckSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	if st, err = store.New(pool); err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	return cfg, st, pool.Close, nil
}
