package main

import (
	"context"
	"fmt"
	"io"
)

// runRetention is `larkline retention run [--dry-run]`: one pass of the retention job,
// even when the periodic job is disabled (an operator asked for it explicitly).
func runRetention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "run" {
		return fmt.Errorf("%w: larkline retention run [--dry-run] [--config F]", errUsage)
	}
	fs, path := newFlags("retention run", stderr)
	dry := fs.Bool("dry-run", false, "count what is due without changing anything")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	rt, _, err := oneShotRuntime(*path, stderr, "postgres.dsn")
	if err != nil {
		return err
	}
	defer rt.close()
	job, err := newRetentionJob(ctx, rt)
	if err != nil {
		return err
	}
	defer job.Close()
	rep, err := job.RunOnce(ctx, *dry)
	if err != nil {
		return err
	}
	return printJSON(stdout, rep)
}
