package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/larkline/larkline/internal/kafka"
	"github.com/larkline/larkline/processors/windows"
)

// runReplay starts a new window processor version next to the running one. Its Goka
// group is new, so it reads the evidence topic from the start, and its closed windows
// carry the new version, which synthesis writes into the versioned namespace. It shows
// its progress (the group's lag on the evidence topic) until it has caught up, then
// keeps running as that version until stopped.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("replay", stderr)
	version := fs.String("processor-version", "", "the new processor version, e.g. v2 (required; must differ from the running one)")
	every := fs.Duration("progress", 10*time.Second, "how often to print progress")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *version == "" {
		return fmt.Errorf("%w: --processor-version is required", errUsage)
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		return err
	}
	cfg.Windows.ProcessorVersion = *version
	if err := validateConfig(cfg); err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serveRoles(ctx, cfg, log, []string{"windows"}) }()

	cl, err := newKafkaClient(cfg, "replay-progress")
	if err != nil {
		cancel()
		<-done
		return err
	}
	defer cl.Close()
	group := string(windows.GroupName(cfg.Kafka.GroupPrefix, *version))
	fmt.Fprintf(stdout, "replaying %s from the start of %s as group %s\n", *version, cfg.Kafka.Topics.Evidence, group)
	tick := time.NewTicker(*every)
	defer tick.Stop()
	caughtUp := false
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
		lags, err := kafka.Lag(ctx, cl, []string{group}, kafka.LagOptions{MaxTimestampFetches: -1})
		if err != nil {
			fmt.Fprintf(stdout, "progress unavailable: %v\n", err)
			continue
		}
		var remaining, committed int64
		for _, g := range lags {
			for _, p := range g.Partitions {
				if p.Topic == cfg.Kafka.Topics.Evidence {
					remaining += p.Lag
					committed += max(p.Committed, 0)
				}
			}
		}
		fmt.Fprintf(stdout, "%s: %d evidence records behind (%d consumed)\n", time.Now().UTC().Format(time.RFC3339), remaining, committed)
		if remaining == 0 && committed > 0 && !caughtUp {
			caughtUp = true
			fmt.Fprintf(stdout, "caught up: %s now runs live next to the old version; stop it with Ctrl-C or keep it running\n", *version)
		}
	}
}
