package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/windows"
)

// versionsPollInterval is how often the windows role reads the version registry: a
// version `versions start` registers starts within it, one `versions retire` retires
// stops within it. A variable for the command's tests.
var versionsPollInterval = 5 * time.Second

// versionsRole is the windows role: one window processor per version of the registry
// that is serving or a candidate (decisions D26), each with the geometry it recorded,
// its metrics on the process's one ops listener labelled version. It follows the
// registry: a new candidate starts, a retired version stops and its local state
// directory goes. A synthesis-only version runs no processor: each poll seeds it the
// windows its source closed since (store.SeedSynthesisWindows). Without Postgres it
// runs windows.processorVersion alone.
type versionsRole struct {
	rt *runtime
	st *store.Store // nil without Postgres

	mu      sync.Mutex
	running map[string]*versionRun
	// failed receives the versions whose processor stopped with an error: the serving
	// one ends the role (the process restarts, as before versions); a candidate is
	// logged and started again at the next poll, so a broken candidate never stops
	// what users see.
	failed chan versionFailure
}

type versionFailure struct {
	version string
	err     error
}

// versionRun is one running version's processor.
type versionRun struct {
	p          *windows.Processor
	cancel     context.CancelFunc
	done       chan struct{}
	unregister func() bool
}

func buildWindows(ctx context.Context, rt *runtime) ([]component, error) {
	r := &versionsRole{rt: rt, running: map[string]*versionRun{}, failed: make(chan versionFailure, 16)}
	if rt.opts.poolMissing == nil {
		st, err := rt.store(ctx)
		if err != nil {
			return nil, err
		}
		r.st = st
		w := rt.opts.windows
		v := w.ProcessorVersion
		_, err = st.EnsureVersion(ctx, versionSpec(w.GroupPrefix, v, w.Window, w.Grace, nil))
		switch {
		case errors.Is(err, store.ErrVersionRetired):
			rt.log.Warn("windows.processorVersion is retired: not running it; the registry's versions run", "processor_version", v)
		case err != nil:
			return nil, err
		}
	}
	if err := rt.ops.AddReadiness("windows", r.ready); err != nil {
		return nil, err
	}
	return []component{r}, nil
}

// versionSpec is what a version records in the registry when it starts.
func versionSpec(groupPrefix, version string, window, grace time.Duration, from *time.Time) store.VersionSpec {
	g := string(windows.GroupName(groupPrefix, version))
	return store.VersionSpec{
		Name: version, Window: window, Grace: grace, CodeVersion: codeVersion(), StartFrom: from,
		Groups: []string{g, windows.PublisherGroup(groupPrefix, version)},
		Topics: []string{g + "-table", g + "-loop", windows.GeometryTopic(groupPrefix, version)},
	}
}

// serving reports whether version serves: without Postgres the one version does;
// when the registry cannot be read, it is taken to serve (the safe answer: stop).
func (r *versionsRole) serving(ctx context.Context, version string) bool {
	if r.st == nil {
		return true
	}
	s, err := r.st.ServingVersion(ctx)
	return err != nil || s == version
}

// ready reports whether every running version recovered its state table and is not
// waiting out a broker or registry outage (it restarts by itself, D27).
func (r *versionsRole) ready(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.running) == 0 {
		return errors.New("no processor version running")
	}
	for v, run := range r.running {
		if err := run.p.Ready(); err != nil {
			return fmt.Errorf("processor version %s: %w", v, err)
		}
	}
	return nil
}

// Run starts the versions and follows the registry until ctx ends or one fails.
func (r *versionsRole) Run(ctx context.Context) error {
	defer r.stopAll()
	if err := r.sync(ctx); err != nil {
		return err
	}
	t := time.NewTicker(versionsPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-r.failed:
			if r.serving(ctx, f.version) {
				return fmt.Errorf("processor version %s: %w", f.version, f.err)
			}
			r.rt.log.Error("a candidate processor version stopped; it starts again at the next poll",
				"processor_version", f.version, "err", f.err)
			r.stop(f.version)
		case <-t.C:
			if err := r.sync(ctx); err != nil {
				r.rt.log.Warn("reading the processor version registry failed; running versions keep running", "err", err)
			}
		}
	}
}

// sync starts the versions that should run and stops the retired ones.
func (r *versionsRole) sync(ctx context.Context) error {
	w := r.rt.opts.windows
	want := map[string]store.ProcessorVersion{}
	if r.st == nil {
		want[w.ProcessorVersion] = store.ProcessorVersion{Name: w.ProcessorVersion, Window: w.Window, Grace: w.Grace}
	} else {
		vs, err := r.st.ListVersions(ctx)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if v.State == store.VersionRetired {
				continue
			}
			if v.SynthesisOf != "" {
				// no window processor: its windows are the source's, seeded for the
				// synthesis workers' stale sweep as the source closes them
				n, err := r.st.SeedSynthesisWindows(ctx, v.Name, v.SynthesisOf)
				if err != nil {
					return err
				}
				if n > 0 {
					r.rt.log.Info("windows seeded for a synthesis-only version", "processor_version", v.Name,
						"synthesis_of", v.SynthesisOf, "windows", n)
				}
				continue
			}
			if v.Window == 0 { // recorded before geometry was: the configured one
				v.Window, v.Grace = w.Window, w.Grace
			}
			want[v.Name] = v
		}
	}
	r.mu.Lock()
	var stop []string
	for v := range r.running {
		if _, ok := want[v]; !ok {
			stop = append(stop, v)
		}
	}
	r.mu.Unlock()
	for _, v := range stop {
		r.stop(v)
		dir := filepath.Join(r.rt.opts.stateDir, v)
		if err := os.RemoveAll(dir); err != nil {
			r.rt.log.Warn("removing a retired version's state directory", "processor_version", v, "err", err)
		}
		r.rt.log.Info("processor version retired: stopped", "processor_version", v)
	}
	names := make([]string, 0, len(want))
	for v := range want {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		r.mu.Lock()
		_, ok := r.running[v]
		r.mu.Unlock()
		if ok {
			continue
		}
		if err := r.start(ctx, want[v]); err != nil {
			return fmt.Errorf("start processor version %s: %w", v, err)
		}
	}
	return nil
}

// start runs one version's processor, its metrics labelled with the version.
func (r *versionsRole) start(ctx context.Context, v store.ProcessorVersion) error {
	reg := prometheus.NewRegistry()
	p, err := newWindowsProcessor(r.rt, v.Name, v.Window, v.Grace, reg)
	if err != nil {
		return err
	}
	col := versionMetrics{reg: reg, version: v.Name}
	if err := r.rt.reg.Register(col); err != nil {
		_ = p.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	run := &versionRun{p: p, cancel: cancel, done: make(chan struct{}), unregister: func() bool { return r.rt.reg.Unregister(col) }}
	r.mu.Lock()
	r.running[v.Name] = run
	r.mu.Unlock()
	go func() {
		defer close(run.done)
		err := p.Run(ctx)
		if err != nil && ctx.Err() == nil {
			select {
			case r.failed <- versionFailure{v.Name, err}:
			case <-ctx.Done():
			}
		}
	}()
	r.rt.log.Info("processor version running", "processor_version", v.Name, "state", string(v.State),
		"window", v.Window.String(), "grace", v.Grace.String())
	return nil
}

// stop stops one version's processor and waits for it to drain.
func (r *versionsRole) stop(v string) {
	r.mu.Lock()
	run, ok := r.running[v]
	delete(r.running, v)
	r.mu.Unlock()
	if !ok {
		return
	}
	run.cancel()
	<-run.done
	if err := run.p.Close(); err != nil {
		r.rt.log.Warn("closing a window processor", "processor_version", v, "err", err)
	}
	run.unregister()
}

func (r *versionsRole) stopAll() {
	r.mu.Lock()
	vs := make([]string, 0, len(r.running))
	for v := range r.running {
		vs = append(vs, v)
	}
	r.mu.Unlock()
	for _, v := range vs {
		r.stop(v)
	}
}

// Close stops whatever still runs (Run stops them itself when it returns).
func (r *versionsRole) Close() error {
	r.stopAll()
	return nil
}

// versionMetrics exposes one version's registry through the process's registry with a
// constant label version=<name>: the processors of two versions register the same
// metric names. Unchecked (it describes nothing): the families are whatever the
// version's registry holds.
type versionMetrics struct {
	reg     *prometheus.Registry
	version string
}

func (versionMetrics) Describe(chan<- *prometheus.Desc) {}

func (c versionMetrics) Collect(ch chan<- prometheus.Metric) {
	mfs, err := c.reg.Gather()
	if err != nil {
		// a partial gather still holds the families that worked
		if len(mfs) == 0 {
			return
		}
	}
	for _, mf := range mfs {
		desc := prometheus.NewDesc(mf.GetName(), mf.GetHelp(), nil, nil)
		for _, m := range mf.GetMetric() {
			ch <- labelledMetric{desc: desc, m: m, version: c.version}
		}
	}
}

// labelledMetric is a gathered metric with the version label added.
type labelledMetric struct {
	desc    *prometheus.Desc
	m       *dto.Metric
	version string
}

func (l labelledMetric) Desc() *prometheus.Desc { return l.desc }

func (l labelledMetric) Write(out *dto.Metric) error {
	name, value := "version", l.version
	out.Label = append(slices.Clone(l.m.GetLabel()), &dto.LabelPair{Name: &name, Value: &value})
	slices.SortFunc(out.Label, func(a, b *dto.LabelPair) int {
		switch {
		case a.GetName() < b.GetName():
			return -1
		case a.GetName() > b.GetName():
			return 1
		}
		return 0
	})
	out.Counter, out.Gauge, out.Histogram, out.Summary, out.Untyped = l.m.Counter, l.m.Gauge, l.m.Histogram, l.m.Summary, l.m.Untyped
	out.TimestampMs = l.m.TimestampMs
	return nil
}

// codeVersion is this binary's build version (what `larkline version` prints).
func codeVersion() string {
	info, _ := debug.ReadBuildInfo()
	return buildVersion(version, info)
}
