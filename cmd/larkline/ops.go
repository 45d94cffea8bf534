package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/internal/store"
	"github.com/larkline/larkline/processors/windows"
)

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("migrate", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, "postgres.dsn")
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, err := store.Migrate(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrations applied: %d (schema up to date)\n", n)
	return nil
}

// errLagUnread makes `larkline lag` exit 1 after printing: a group or partition
// whose offsets could not be read is not "no lag".
var errLagUnread = errors.New("the lag of some groups could not be read")

func runLag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("lag", stderr)
	groups := fs.String("groups", "", "comma-separated consumer groups, any on the cluster (default: larkline's groups of this config and lag.groups)")
	asJSON := fs.Bool("json", false, "print JSON (one object per group) instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	cl, err := newKafkaClient(cfg, "lag")
	if err != nil {
		return err
	}
	defer cl.Close()
	names := lagGroups(cfg)
	needs := lagAccess(cfg)
	if *groups != "" {
		names = nil
		for _, g := range strings.Split(*groups, ",") {
			if g = strings.TrimSpace(g); g != "" && !slices.Contains(names, g) {
				names = append(names, g)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("%w: --groups names no group", errUsage)
		}
		needs = groupsAccess(names)
	}
	if err := checkAccess(ctx, cl, needs); err != nil {
		return err
	}
	if *groups == "" {
		names = versionGroups(ctx, cl, cfg, names, stderr)
	}
	lags, err := kafka.Lag(ctx, cl, names, kafka.LagOptions{})
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSON(stdout, lagJSON(lags))
	} else {
		writeLagTable(stdout, lags)
	}
	if err != nil {
		return err
	}
	if unread := unreadGroups(lags); len(unread) > 0 {
		return fmt.Errorf("%w: %s", errLagUnread, strings.Join(unread, ", "))
	}
	return nil
}

// unreadGroups are the groups whose lag, or the lag of one of whose partitions,
// could not be read.
func unreadGroups(lags []kafka.GroupLag) []string {
	var unread []string
	for _, g := range lags {
		bad := g.Err != nil
		for _, p := range g.Partitions {
			bad = bad || p.Err != nil
		}
		if bad {
			unread = append(unread, g.Group)
		}
	}
	return unread
}

// versionGroupsPrefix starts the groups of every processor version (windows.GroupName,
// windows.PublisherGroup): the lag role and `larkline lag` follow the versions
// `larkline versions start` and `retire` add and remove with it.
func versionGroupsPrefix(cfg *config.Config) string {
	return string(windows.GroupName(cfg.Kafka.GroupPrefix, "")) // "<prefix>-windows-"
}

// versionGroups adds to names the cluster's groups of other processor versions
// (versionGroupsPrefix). Listing needs Describe on them; when it fails, names stand
// and the failure is said on stderr.
func versionGroups(ctx context.Context, cl *kgo.Client, cfg *config.Config, names []string, stderr io.Writer) []string {
	listed, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "larkline lag: other processor versions' groups not listed: %v\n", err)
		return names
	}
	var more []string
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, versionGroupsPrefix(cfg)) && !slices.Contains(names, g) {
			more = append(more, g)
		}
	}
	slices.Sort(more)
	return append(names, more...)
}

// lagGroups are the groups the lag role and `larkline lag` watch: larkline's and
// lag.groups, each once.
func lagGroups(cfg *config.Config) []string {
	out := larklineGroups(cfg)
	for _, g := range cfg.Lag.Groups {
		if !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// groupLagJSON is one group of `larkline lag --json`.
type groupLagJSON struct {
	Group      string             `json:"group"`
	State      string             `json:"state"`
	Members    int                `json:"members"`
	TotalLag   int64              `json:"total_lag"`
	Error      string             `json:"error,omitempty"`
	Partitions []partitionLagJSON `json:"partitions"`
}

type partitionLagJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       int64  `json:"end"`
	Lag       int64  `json:"lag"`
	// LagSeconds is null when not measured.
	LagSeconds *float64 `json:"lag_seconds"`
	Error      string   `json:"error,omitempty"`
}

func lagJSON(lags []kafka.GroupLag) []groupLagJSON {
	out := make([]groupLagJSON, 0, len(lags))
	for _, g := range lags {
		j := groupLagJSON{Group: g.Group, State: g.State, Members: g.Members, TotalLag: g.TotalLag(), Partitions: []partitionLagJSON{}}
		if g.Err != nil {
			j.Error = g.Err.Error()
		}
		for _, p := range g.Partitions {
			pj := partitionLagJSON{Topic: p.Topic, Partition: p.Partition, Committed: p.Committed, End: p.End, Lag: p.Lag}
			if p.LagTime != kafka.LagTimeUnknown {
				s := p.LagTime.Seconds()
				pj.LagSeconds = &s
			}
			if p.Err != nil {
				pj.Error = p.Err.Error()
			}
			j.Partitions = append(j.Partitions, pj)
		}
		out = append(out, j)
	}
	return out
}

// larklineGroups are the consumer groups one deployment runs.
func larklineGroups(cfg *config.Config) []string {
	return []string{
		string(windows.GroupName(cfg.Kafka.GroupPrefix, cfg.Windows.ProcessorVersion)),
		windows.PublisherGroup(cfg.Kafka.GroupPrefix, cfg.Windows.ProcessorVersion),
		groupName(cfg, groupSink), groupName(cfg, groupSynthesis), groupName(cfg, groupWorkspaces),
	}
}

// groupName is a role's consumer group under kafka.groupPrefix.
func groupName(cfg *config.Config, role string) string { return cfg.Kafka.GroupPrefix + "-" + role }

// Consumer group names of the franz-go stages.
const (
	groupSink       = "sink"
	groupSynthesis  = "synthesis"
	groupWorkspaces = "workspaces"
)

func writeLagTable(w io.Writer, lags []kafka.GroupLag) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATE\tTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tLAG TIME")
	for _, g := range lags {
		if g.Err != nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\terror: %v\n", g.Group, g.State, g.Err)
			continue
		}
		if len(g.Partitions) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t(no committed offsets)\n", g.Group, g.State)
		}
		for _, p := range g.Partitions {
			lagTime := "unknown"
			if p.LagTime != kafka.LagTimeUnknown {
				lagTime = p.LagTime.Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", g.Group, g.State, p.Topic, p.Partition, p.Committed, p.End, p.Lag, lagTime)
		}
	}
	_ = tw.Flush()
}
