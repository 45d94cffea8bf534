package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"demo":        {"run the whole pipeline on the embedded default (in-process Kafka, embedded Postgres, a local Lark)", runDemo},
	"run":         {"run long-running roles (--roles windows,sink,synthesize,ingest,api,…)", runRoles},
	"migrate":     {"apply the Postgres schema migrations (idempotent)", runMigrate},
	"topics":      {"topics ensure: create missing topics and report mismatches", runTopics},
	"replay":      {"run a new window processor version from the start of the evidence topic", runReplay},
	"lag":         {"print consumer lag per group, topic and partition", runLag},
	"version":     {"print the build version", runVersion},
	"workspaces":  {"workspaces put|status|get|publish: manage workspaces (Postgres) or publish to the feed (Kafka)", runWorkspaces},
	"bind":        {"bind add|remove|list: bind Lark chats to workspaces", runBind},
	"retention":   {"retention run [--dry-run]: redact or delete evidence past the retention period", runRetention},
	"deadletters": {"deadletters list|redrive: list parked records (ids, never text) or feed them back through their stage", runDeadLetters},
	"refresh":     {"refresh --workspace W: reconcile one workspace from Lark history now, even if no longer firing", runRefresh},
}

// errUsage marks a command-line mistake: exit code 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "larkline: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "larkline %s: %v\n", args[0], err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: larkline <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'larkline <command> -h' for a command's flags.")
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintln(stdout, "larkline", version)
	return nil
}
