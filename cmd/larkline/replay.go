package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// runReplay is the deprecated `larkline replay --processor-version V`: it points at
// `larkline versions start V` and runs it (decisions D26).
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("replay", stderr)
	version := fs.String("processor-version", "", "the new processor version (deprecated: larkline versions start VERSION)")
	every := fs.Duration("progress", 10*time.Second, "how often to print progress")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "larkline replay is deprecated: use `larkline versions start VERSION` (docs/operations.md, Run a new processor version)")
	if *version == "" {
		return fmt.Errorf("%w: --processor-version is required", errUsage)
	}
	return runVersions(ctx, []string{"start", *version, "--config", *path, "--progress", every.String()}, stdout, stderr)
}
