package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/larkline/larkline/schemas/ids"
)

// runRefresh is `larkline refresh --workspace W`: the design's manual "Refresh from
// sources" (§6). It reconciles one workspace's chats from Lark history even when the
// workspace is no longer eligible for automatic scans, still bounded by its creation
// time, the ingestion lookback and retention.
func runRefresh(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, path := newFlags("refresh", stderr)
	wsFlag := fs.String("workspace", "", "workspace id (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ws, err := ids.ParseWorkspaceID(*wsFlag)
	if err != nil {
		return fmt.Errorf("%w: --workspace: %v", errUsage, err)
	}
	rt, _, err := oneShotRuntime(*path, stderr, "postgres.dsn", "lark.appID", "lark.appSecret")
	if err != nil {
		return err
	}
	defer rt.close()
	r, comps, err := newReconciler(ctx, rt)
	if err != nil {
		return err
	}
	defer func() {
		_ = r.Close()
		for _, c := range slices.Backward(comps) {
			_ = c.Close()
		}
	}()
	rep, err := r.Refresh(ctx, ws)
	if err != nil {
		return err
	}
	return printJSON(stdout, rep)
}
