package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

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

func runLag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("lag", stderr)
	groups := fs.String("groups", "", "comma-separated consumer groups (default: larkline's groups of this config)")
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
	names := larklineGroups(cfg)
	if *groups != "" {
		names = strings.Split(*groups, ",")
	}
	if *groups == "" {
		if err := checkAccess(ctx, cl, lagAccess(cfg)); err != nil {
			return err
		}
	}
	lags, err := kafka.Lag(ctx, cl, names, kafka.LagOptions{})
	if err != nil {
		return err
	}
	writeLagTable(stdout, lags)
	return nil
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
