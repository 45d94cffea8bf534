package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/larkline/larkline/schemas/ids"
)

// windowsSubs are the subcommands of the windows noun.
var windowsSubs = []string{"retry"}

// runWindows is the windows noun; retry hands one window of the serving version back
// to synthesis (store.RetryWindows): the needs_attention path after its cause is fixed.
func runWindows(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("windows", windowsSubs, args, stderr)
	if err != nil {
		return err
	}
	fs, path := newFlags("windows "+sub, stderr)
	wsFlag := fs.String("workspace", "", "the workspace (required)")
	window := fs.String("window", "", "the window's start, RFC 3339 (required), as in its state's source key")
	chat := fs.String("chat", "", "only this chat's window (default: every chat of the workspace)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *wsFlag == "" || *window == "" {
		return fmt.Errorf("%w: --workspace and --window are required", errUsage)
	}
	ws, err := ids.ParseWorkspaceID(*wsFlag)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	start, err := time.Parse(time.RFC3339, *window)
	if err != nil {
		return fmt.Errorf("%w: --window: %w", errUsage, err)
	}
	_, st, closeStore, err := openStoreCommand(ctx, *path)
	if err != nil {
		return err
	}
	defer closeStore()
	serving, err := st.ServingVersion(ctx)
	if err != nil {
		return err
	}
	retried, left, err := st.RetryWindows(ctx, ws, ids.ChatID(*chat), serving, start)
	if err != nil {
		return err
	}
	if *asJSON {
		type row struct {
			Window   string `json:"window"`
			Status   string `json:"status"`
			Attempts int    `json:"attempts"`
			Retried  bool   `json:"retried"`
		}
		out := []row{}
		for _, w := range retried {
			out = append(out, row{w.Key.SourceKey(), string(w.Status), w.Attempts, true})
		}
		for _, w := range left {
			out = append(out, row{w.Key.SourceKey(), string(w.Status), w.Attempts, false})
		}
		return printJSON(stdout, out)
	}
	for _, w := range retried {
		fmt.Fprintf(stdout, "retried   %s (version %s): the next stale sweep of a synthesis worker takes it over\n", w.Key.SourceKey(), serving)
	}
	for _, w := range left {
		fmt.Fprintf(stdout, "unchanged %s: %s, attempt %d (only needs_attention and failed windows are retried)\n", w.Key.SourceKey(), w.Status, w.Attempts)
	}
	return nil
}
